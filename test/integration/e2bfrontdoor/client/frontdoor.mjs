// Drives the front door with the unmodified SDK named by E2B_PKG. E2B_API_URL, E2B_SANDBOX_URL
// and E2B_API_KEY point at it; OTHER_KEY is a key of another namespace. Prints one line per
// check and "all checks passed" at the end; exits 1 on the first failure. E2B_TEMPLATE names the
// template (default base). On a real cluster E2B_CHECK_ENV=1 also checks that a command sees the
// create's envs, E2B_CHECK_EXPIRY=1 that a sandbox is gone after its timeout, and
// E2B_CHECK_AUTOPAUSE=1 that autoPause pauses an idle sandbox and autoResume wakes it.
const { Sandbox, AuthenticationError } = await import(process.env.E2B_PKG)
const { check, passed } = await import('./check.mjs')

const template = process.env.E2B_TEMPLATE || 'base'
// Resuming starts a new Pod (under gVisor, on a loaded CI node): calls that resume wait longer
// than the SDK's default 60 s request timeout.
const slow = { requestTimeoutMs: 180_000 }
// Metadata unique to this run, so the filter sees only this run's sandboxes.
const run = `fd-${process.pid}-${Date.now()}`
// suite marks both sandboxes the pager must see, and no other: sandboxes a failed earlier run left
// behind in the namespace must not count.
const sbx = await Sandbox.create(template, { metadata: { run, suite: run }, envs: { FOO: 'bar' }, timeoutMs: 120_000 })
check('create returns an id', /^[a-z0-9]+$/.test(sbx.sandboxId), sbx.sandboxId)
const r = await sbx.commands.run('echo hi; echo err 1>&2')
check('commands.run', r.exitCode === 0 && r.stdout === 'hi\n' && r.stderr === 'err\n', JSON.stringify(r))
await sbx.files.write('kept.txt', 'before pause')
check('files.read', (await sbx.files.read('kept.txt')) === 'before pause')
check('files.list', (await sbx.files.list('.')).some((e) => e.name === 'kept.txt'))
const info = await sbx.getInfo()
check('getInfo', info.metadata.run === run && info.state === 'running' && info.endAt instanceof Date, JSON.stringify(info))

if (process.env.E2B_CHECK_ENV === '1') {
  const env = await sbx.commands.run('echo "$FOO"')
  check('the command sees the envs of create', env.stdout === 'bar\n', JSON.stringify(env))
}

const other = await Sandbox.create(template, { metadata: { run: `${run}-other`, suite: run } })
const filtered = await Sandbox.list({ query: { metadata: { run } } }).nextItems()
check('list with a metadata filter', filtered.length === 1 && filtered[0].sandboxId === sbx.sandboxId, JSON.stringify(filtered))
const pager = Sandbox.list({ limit: 1, query: { metadata: { suite: run } } })
const seen = []
while (pager.hasNext) for (const s of await pager.nextItems()) seen.push(s.sandboxId)
check('list pages', seen.length === 2 && seen.includes(sbx.sandboxId) && seen.includes(other.sandboxId), JSON.stringify(seen))

await sbx.setTimeout(3_600_000)
const moved = await sbx.getInfo()
check('setTimeout moves endAt', moved.endAt.getTime() > info.endAt.getTime(), `${info.endAt} -> ${moved.endAt}`)

check('pause', (await sbx.pause()) === true)
check('getInfo after pause', (await sbx.getInfo()).state === 'paused')
check('second pause', (await sbx.pause()) === false)
const back = await Sandbox.connect(sbx.sandboxId, slow)
check('connect resumes', (await back.files.read('kept.txt')) === 'before pause')

check('kill', (await back.kill()) === true)
check('second kill', (await Sandbox.kill(sbx.sandboxId)) === false)

try {
  await Sandbox.list({ apiKey: 'wrong' }).nextItems()
  check('wrong key', false, 'no error')
} catch (e) {
  check('wrong key', e instanceof AuthenticationError, String(e))
}
try {
  await Sandbox.connect(other.sandboxId, { apiKey: process.env.OTHER_KEY })
  check("another namespace's sandbox", false, 'connected')
} catch (e) {
  check("another namespace's sandbox", /not found/i.test(String(e)), String(e))
}
try {
  await Sandbox.create('no-such-template')
  check('unknown template', false, 'created')
} catch (e) {
  check('unknown template', String(e).includes('no-such-template'), String(e))
}
const plain = (await other.getInfo()).lifecycle
check('getInfo shows onTimeout kill by default', plain?.onTimeout === 'kill' && !plain.autoResume, JSON.stringify(plain))
await other.kill()

// lifecycle: onTimeout "pause" is autoPause, autoResume the policy for traffic; getInfo shows both.
const pausing = await Sandbox.create(template, { metadata: { run: `${run}-lifecycle` }, lifecycle: { onTimeout: 'pause', autoResume: true } })
const life = (await pausing.getInfo()).lifecycle
check('getInfo shows onTimeout pause and autoResume', life?.onTimeout === 'pause' && life.autoResume === true, JSON.stringify(life))
await pausing.kill()

if (process.env.E2B_CHECK_AUTOPAUSE === '1') {
  // With autoPause the timeout pauses an idle sandbox instead of killing it; with autoResume the
  // next command wakes it, and it still has its files.
  const a = await Sandbox.create(template, { metadata: { run: 'fd-autopause' }, timeoutMs: 10_000, lifecycle: { onTimeout: 'pause', autoResume: true } })
  await a.files.write('kept.txt', 'before the pause')
  check('autoPause: paused once idle for its timeout', await waitState(a.sandboxId, 'paused'))
  const woke = await a.commands.run('cat kept.txt', { ...slow, timeoutMs: slow.requestTimeoutMs })
  check('autoResume: a command wakes it and finds its file', woke.stdout === 'before the pause', JSON.stringify(woke))
  check('autoResume: running again', (await a.getInfo()).state === 'running')
  await a.kill()
  // Without autoResume traffic does not wake it; connect does.
  const b = await Sandbox.create(template, { metadata: { run: 'fd-autopause' }, timeoutMs: 10_000, lifecycle: { onTimeout: 'pause' } })
  await b.files.write('kept.txt', 'kept')
  check('autoPause without autoResume: paused once idle', await waitState(b.sandboxId, 'paused'))
  const refused = await b.commands.run('true').then(() => 'ran', (e) => String(e))
  check('without autoResume a command does not wake it', refused !== 'ran' && (await b.getInfo()).state === 'paused', refused)
  const resumed = await Sandbox.connect(b.sandboxId, slow)
  check('connect resumes it with its file', (await resumed.files.read('kept.txt')) === 'kept')
  await resumed.kill()
}

if (process.env.E2B_CHECK_EXPIRY === '1') {
  const short = await Sandbox.create(template, { metadata: { run: 'fd-expiry' }, timeoutMs: 60_000 })
  await short.setTimeout(5_000)
  const deadline = Date.now() + 120_000
  let left = [short]
  while (left.length > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 500))
    left = await Sandbox.list({ query: { metadata: { run: 'fd-expiry' } } }).nextItems()
  }
  check('gone after its timeout', left.length === 0, JSON.stringify(left))
}
console.log(`all checks passed (${passed()})`)

// waitState polls getInfo until the sandbox is in state, for at most three minutes.
async function waitState(id, state) {
  const deadline = Date.now() + 180_000
  while (Date.now() < deadline) {
    if ((await Sandbox.getInfo(id)).state === state) return true
    await new Promise((resolve) => setTimeout(resolve, 500))
  }
  return false
}
