// compat.mjs drives one pinned version of the unmodified E2B SDK against sandboxd's envd port in
// the SDK's debug mode (http://localhost:49983, no control plane). test/integration/e2b runs it
// with E2B_PKG (the npm alias of the version), ENVD_VERSION (the version sandboxd reports),
// ENVD_TOKEN (the sandbox's access token) and CLAIM_VALUE (a variable set through claim
// settings). It prints "ok <check>" or "FAIL <check>: <reason>" per check and exits 1 on any
// failure. With BENCH=1 it prints benchmark figures instead.
import { createHash, randomBytes } from 'node:crypto'
import { check, expect, failures, rejects } from '../../checks.mjs'

const pkg = process.env.E2B_PKG
const { Sandbox, CommandExitError, NotFoundError, FileNotFoundError, AuthenticationError } = await import(pkg)

const token = process.env.ENVD_TOKEN
const connect = (accessToken) =>
  new Sandbox({ sandboxId: 'debug_sandbox_id', envdVersion: process.env.ENVD_VERSION, envdAccessToken: accessToken, debug: true })
const sbx = connect(token)

// until polls fn until it returns true or the deadline passes.
async function until(fn, what, ms = 30000) {
  const deadline = Date.now() + ms
  while (Date.now() < deadline) {
    if (await fn()) return
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error(`timed out waiting for ${what}`)
}
const sha = (buf) => createHash('sha256').update(buf).digest('hex')

if (process.env.BENCH === '1') {
  await bench()
  process.exit(0)
}

await check('commands.run foreground with envs and claim env', async () => {
  const r = await sbx.commands.run('echo hi; echo err 1>&2; echo $FOO; echo $CLAIM_VAR', { envs: { FOO: 'bar' } })
  expect(r.exitCode === 0, `exit ${r.exitCode}`)
  expect(r.stdout === `hi\nbar\n${process.env.CLAIM_VALUE}\n`, `stdout ${JSON.stringify(r.stdout)}`)
  expect(r.stderr === 'err\n', `stderr ${JSON.stringify(r.stderr)}`)
})

await check('commands.run cwd is the home directory', async () => {
  const r = await sbx.commands.run('pwd')
  expect(r.stdout.trim() === process.env.ROOT_DIR, `pwd ${JSON.stringify(r.stdout)}, want ${process.env.ROOT_DIR}`)
})

await check('commands.run non-zero exit throws CommandExitError', async () => {
  const err = await rejects(sbx.commands.run('echo out; exit 3'), CommandExitError, 'exit 3')
  expect(err.exitCode === 3 && err.stdout === 'out\n', `exitCode ${err.exitCode} stdout ${JSON.stringify(err.stdout)}`)
})

await check('background command, list and kill', async () => {
  const h = await sbx.commands.run('sleep 300', { background: true })
  const listed = await sbx.commands.list()
  const p = listed.find((x) => x.pid === h.pid)
  expect(p && p.cmd === '/bin/bash' && p.args.at(-1) === 'sleep 300', `list ${JSON.stringify(listed)}`)
  expect((await h.kill()) === true, 'kill returned false')
  const err = await rejects(h.wait(), CommandExitError, 'killed command')
  expect(err.exitCode === -1, `exitCode ${err.exitCode}`)
  expect((await sbx.commands.kill(h.pid)) === false, 'second kill returned true')
})

await check('stdin: sendStdin then closeStdin', async () => {
  const h = await sbx.commands.run('cat; echo done', { background: true, stdin: true })
  await sbx.commands.sendStdin(h.pid, 'hello\n')
  await sbx.commands.closeStdin(h.pid)
  const r = await h.wait()
  expect(r.stdout === 'hello\ndone\n', `stdout ${JSON.stringify(r.stdout)}`)
})

await check('stdin:false gives EOF', async () => {
  const r = await sbx.commands.run('cat; echo eof')
  expect(r.stdout === 'eof\n', `stdout ${JSON.stringify(r.stdout)}`)
})

await check('pty session with resize', async () => {
  let out = ''
  const dec = new TextDecoder()
  const h = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += dec.decode(d) } })
  await sbx.pty.resize(h.pid, { cols: 100, rows: 40 })
  await sbx.pty.sendInput(h.pid, new TextEncoder().encode('stty size; exit\n'))
  await h.wait().catch(() => {})
  expect(out.includes('40 100'), `pty output ${JSON.stringify(out)}`)
})

await check('process survives a dropped stream; connect reattaches', async () => {
  const h = await sbx.commands.run('read line; echo got $line', { background: true, stdin: true, timeoutMs: 0 })
  await h.disconnect()
  expect((await sbx.commands.list()).some((p) => p.pid === h.pid), 'process gone after its stream dropped')
  const again = await sbx.commands.connect(h.pid)
  await sbx.commands.sendStdin(h.pid, 'x\n')
  const r = await again.wait()
  expect(r.stdout === 'got x\n', `stdout ${JSON.stringify(r.stdout)}`)
})

await check('process is killed when its timeout expires', async () => {
  const h = await sbx.commands.run('sleep 300', { background: true, timeoutMs: 1000 })
  await h.disconnect()
  await until(async () => !(await sbx.commands.list()).some((p) => p.pid === h.pid), 'the timed-out process to end')
})

await check('files write/read/list/exists/getInfo/makeDir/rename/remove', async () => {
  const info = await sbx.files.write('/home/user/dir/a.txt', 'hello file')
  expect(info.path === '/home/user/dir/a.txt' && info.name === 'a.txt', `write ${JSON.stringify(info)}`)
  expect((await sbx.files.read('dir/a.txt')) === 'hello file', 'read relative')
  const r = await sbx.commands.run('cat dir/a.txt')
  expect(r.stdout === 'hello file', 'the command sees the written file')
  const list = await sbx.files.list('/home/user/dir')
  expect(list.length === 1 && list[0].name === 'a.txt' && list[0].type === 'file' && list[0].size === 10, `list ${JSON.stringify(list)}`)
  expect((await sbx.files.exists('/home/user/dir/a.txt')) === true, 'exists')
  expect((await sbx.files.exists('/home/user/nope')) === false, 'exists on a missing path')
  const gi = await sbx.files.getInfo('/home/user/dir/a.txt')
  expect(gi.type === 'file' && gi.size === 10 && gi.permissions === '-rw-r--r--' && gi.modifiedTime instanceof Date, `getInfo ${JSON.stringify(gi)}`)
  expect((await sbx.files.makeDir('/home/user/made/deep')) === true, 'makeDir')
  expect((await sbx.files.makeDir('/home/user/made/deep')) === false, 'makeDir on an existing dir')
  const moved = await sbx.files.rename('/home/user/dir/a.txt', '/home/user/made/b.txt')
  expect(moved.path === '/home/user/made/b.txt', `rename ${JSON.stringify(moved)}`)
  const deep = await sbx.files.list('/home/user/made', { depth: 2 })
  expect(deep.map((e) => e.path).sort().join(',') === '/home/user/made/b.txt,/home/user/made/deep', `depth 2 ${JSON.stringify(deep)}`)
  await sbx.files.remove('/home/user/made')
  expect((await sbx.files.exists('/home/user/made')) === false, 'removed')
  await rejects(sbx.files.read('/home/user/made/b.txt'), FileNotFoundError, 'read a removed file')
})

await check('multi-file write', async () => {
  const infos = await sbx.files.write([
    { path: '/home/user/multi/one.txt', data: 'one' },
    { path: '/home/user/multi/two.txt', data: 'two' },
  ])
  expect(infos.length === 2 && infos[1].path === '/home/user/multi/two.txt', `write ${JSON.stringify(infos)}`)
  expect((await sbx.files.read('/home/user/multi/two.txt')) === 'two', 'read two')
})

await check('10 MiB file both ways (multipart and gzip)', async () => {
  const data = randomBytes(10 << 20)
  await sbx.files.write('/home/user/big.bin', data)
  const back = Buffer.from(await sbx.files.read('/home/user/big.bin', { format: 'bytes' }))
  expect(sha(back) === sha(data), 'multipart round trip differs')
  await sbx.files.write('/home/user/big-gz.bin', data, { gzip: true })
  const gz = Buffer.from(await sbx.files.read('/home/user/big-gz.bin', { format: 'bytes', gzip: true }))
  expect(sha(gz) === sha(data), 'gzip round trip differs')
})

await check('watchDir reports a created file', async () => {
  await sbx.files.makeDir('/home/user/watched')
  const seen = []
  const w = await sbx.files.watchDir('/home/user/watched', (e) => seen.push(e), { recursive: true })
  await sbx.files.write('/home/user/watched/new.txt', 'x')
  await until(() => seen.some((e) => e.name === 'new.txt'), 'a watch event for new.txt')
  await w.stop()
})

await check('paths cannot leave the root', async () => {
  const outside = '/home/user/../../../etc/passwd'
  const written = await sbx.files.write(outside, 'not the real one')
  expect(written.path.startsWith('/home/user/'), `write outside landed at ${written.path}`)
  const r = await sbx.commands.run('cat /etc/passwd')
  expect(r.stdout !== 'not the real one', 'the write escaped the root')
  await sbx.files.remove(written.path)
})

await check('signed URLs for /files', async () => {
  const up = await sbx.uploadUrl('/home/user/signed.txt')
  const form = new FormData()
  form.append('file', new Blob(['signed']), '/home/user/signed.txt')
  const put = await fetch(up, { method: 'POST', body: form })
  expect(put.status === 200, `upload through a signed URL: ${put.status}`)
  const down = await sbx.downloadUrl('/home/user/signed.txt', { useSignatureExpiration: 60 })
  const got = await fetch(down)
  expect(got.status === 200 && (await got.text()) === 'signed', `download through a signed URL: ${got.status}`)
  const forged = new URL(down)
  forged.searchParams.set('path', '/home/user/other.txt')
  expect((await fetch(forged)).status === 401, 'a signature for another path was accepted')
  expect((await fetch(new URL('/files?path=/home/user/signed.txt', down))).status === 401, 'a plain URL was accepted')
})

await check('missing or wrong access token is refused', async () => {
  const bare = await Sandbox.create()
  await rejects(bare.commands.run('true'), AuthenticationError, 'run without a token')
  const wrong = connect('not-the-token')
  await rejects(wrong.commands.run('true'), AuthenticationError, 'run with a wrong token')
  await rejects(wrong.files.list('/home/user'), AuthenticationError, 'list with a wrong token')
  expect((await wrong.isRunning()) === true, 'health must stay open')
})

console.log(failures() === 0 ? 'all checks passed' : `${failures()} checks failed`)
process.exit(failures() === 0 ? 0 : 1)

function report(what, times) {
  times.sort((a, b) => a - b)
  const pct = (p) => times[Math.min(times.length - 1, Math.floor((p / 100) * times.length))]
  console.log(`bench ${what} n=${times.length} p50_ms=${pct(50).toFixed(2)} p99_ms=${pct(99).toFixed(2)}`)
}

// bench prints `commands.run('true')` round-trip percentiles and file throughput.
async function bench() {
  const n = Number(process.env.BENCH_RUNS ?? 200)
  for (let i = 0; i < 20; i++) await sbx.commands.run('true')
  const times = []
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint()
    await sbx.commands.run('true')
    times.push(Number(process.hrtime.bigint() - t0) / 1e6)
  }
  report(`commands.run('true') (envd Start of /bin/bash -l -c true)`, times)
  // The legacy runtime API's POST /execute, with the same command and without a shell.
  for (const command of ['/bin/bash -l -c true', 'true']) {
    const legacy = []
    for (let i = 0; i < n + 20; i++) {
      const t0 = process.hrtime.bigint()
      const resp = await fetch(`${process.env.LEGACY_URL}/execute`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
        body: JSON.stringify({ command }),
      })
      const body = await resp.json()
      if (body.exit_code !== 0) throw new Error(`legacy execute: ${JSON.stringify(body)}`)
      if (i >= 20) legacy.push(Number(process.hrtime.bigint() - t0) / 1e6)
    }
    report(`legacy POST /execute '${command}'`, legacy)
  }
  for (const mib of [1, 64]) {
    const data = randomBytes(mib << 20)
    let t0 = process.hrtime.bigint()
    await sbx.files.write('/home/user/bench.bin', data)
    const w = Number(process.hrtime.bigint() - t0) / 1e9
    t0 = process.hrtime.bigint()
    await sbx.files.read('/home/user/bench.bin', { format: 'bytes' })
    const r = Number(process.hrtime.bigint() - t0) / 1e9
    console.log(`bench files ${mib}MiB write_MiBps=${(mib / w).toFixed(1)} read_MiBps=${(mib / r).toFixed(1)}`)
  }
}
