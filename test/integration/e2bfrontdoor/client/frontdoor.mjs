// Drives the front door with the unmodified SDK named by E2B_PKG. E2B_API_URL, E2B_SANDBOX_URL
// and E2B_API_KEY point at it; OTHER_KEY is a key of another namespace. Prints one line per
// check and "all checks passed" at the end; exits 1 on the first failure. E2B_TEMPLATE names the
// template (default base). On a real cluster E2B_CHECK_ENV=1 also checks that a command sees the
// create's envs, and E2B_CHECK_EXPIRY=1 that a sandbox is gone after its timeout.
const { Sandbox, AuthenticationError } = await import(process.env.E2B_PKG)

let n = 0
function check(name, ok, detail = '') {
  n++
  if (!ok) {
    console.log(`FAIL ${name} ${detail}`)
    process.exit(1)
  }
  console.log(`ok   ${name}`)
}

const template = process.env.E2B_TEMPLATE || 'base'
// Metadata unique to this run, so the filter sees only this run's sandboxes.
const run = `fd-${process.pid}-${Date.now()}`
const sbx = await Sandbox.create(template, { metadata: { run }, envs: { FOO: 'bar' }, timeoutMs: 120_000 })
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

const other = await Sandbox.create(template, { metadata: { run: `${run}-other` } })
const filtered = await Sandbox.list({ query: { metadata: { run } } }).nextItems()
check('list with a metadata filter', filtered.length === 1 && filtered[0].sandboxId === sbx.sandboxId, JSON.stringify(filtered))
const pager = Sandbox.list({ limit: 1 })
const seen = []
while (pager.hasNext) for (const s of await pager.nextItems()) seen.push(s.sandboxId)
check('list pages', seen.length === 2 && seen.includes(sbx.sandboxId) && seen.includes(other.sandboxId), JSON.stringify(seen))

await sbx.setTimeout(3_600_000)
const moved = await sbx.getInfo()
check('setTimeout moves endAt', moved.endAt.getTime() > info.endAt.getTime(), `${info.endAt} -> ${moved.endAt}`)

check('pause', (await sbx.pause()) === true)
check('getInfo after pause', (await sbx.getInfo()).state === 'paused')
check('second pause', (await sbx.pause()) === false)
const back = await Sandbox.connect(sbx.sandboxId)
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
await other.kill()

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
console.log(`all checks passed (${n})`)
