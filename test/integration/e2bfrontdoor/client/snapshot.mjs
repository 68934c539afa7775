// Drives the front door's snapshot and fork calls with the unmodified SDK named by E2B_PKG.
// E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY point at it; OTHER_KEY is a key of another
// namespace; E2B_TEMPLATE (default base) is the source's template.
// Optional: FAIL_KEY is the metadata key whose value "fail" makes a sandbox's captures fail (the
// integration tier, which plays captures; unset on a real cluster, which skips those checks);
// FORK_COUNT (default 2) sandboxes are forked; CHECK_FILES=1 checks that what the source wrote is
// in every sandbox started from its snapshots and that each fork's writes are its own (a real
// capture; the integration tier's captures hold no files).
// Prints one line per check, "time <step> <ms>" lines, and "all checks passed" at the end;
// exits 1 on the first failure.
const { Sandbox, SandboxError, SandboxNotFoundError } = await import(process.env.E2B_PKG)
const { check, passed, throws } = await import('./check.mjs')

const other = { apiKey: process.env.OTHER_KEY }
const run = `snap-${process.pid}-${Date.now()}`
const alias = `s${process.pid}`
const template = process.env.E2B_TEMPLATE || 'base'
const forkCount = Number(process.env.FORK_COUNT || 2)
const checkFiles = process.env.CHECK_FILES === '1'
// Captures and cold starts on a loaded node take longer than the SDK's default request bound.
const slow = { requestTimeoutMs: 600_000 }
const state = 'before the snapshot'

async function all(paginator) {
  const out = []
  while (paginator.hasNext) out.push(...(await paginator.nextItems()))
  return out
}

async function timed(step, fn) {
  const start = Date.now()
  const out = await fn()
  console.log(`time ${step} ${Date.now() - start}`)
  return out
}

const sbx = await Sandbox.create(template, { metadata: { run }, timeoutMs: 900_000, ...slow })
await sbx.files.write('state.txt', state)

const unnamed = await timed('createSnapshot', () => sbx.createSnapshot(slow))
check('createSnapshot answers <id>:default and no names', /^[a-z0-9]+:default$/.test(unnamed.snapshotId) && unnamed.names.length === 0, JSON.stringify(unnamed))
const named = await Sandbox.createSnapshot(sbx.sandboxId, { name: `${alias}:v1`, ...slow })
check('createSnapshot with a name answers <namespace>/<name>:<tag>', named.snapshotId.endsWith(`/${alias}:v1`) && named.names.length === 1 && named.names[0] === named.snapshotId.slice(0, -3), JSON.stringify(named))
await throws('createSnapshot of an unknown sandbox', () => Sandbox.createSnapshot('nosuchsandbox'), (e) => e instanceof SandboxNotFoundError)

const mine = await all(sbx.listSnapshots())
check("sbx.listSnapshots lists the sandbox's snapshots", mine.length === 2 && mine.some((s) => s.snapshotId === named.snapshotId), JSON.stringify(mine))
const paged = await all(Sandbox.listSnapshots({ sandboxId: sbx.sandboxId, limit: 1 }))
check('listSnapshots pages', paged.length === 2 && paged[0].snapshotId !== paged[1].snapshotId, JSON.stringify(paged))
const byName = await Sandbox.listSnapshots({ name: alias }).nextItems()
check('listSnapshots by name', byName.length === 1 && byName[0].snapshotId === named.snapshotId, JSON.stringify(byName))

const fromSnap = await timed('create from snapshot', () => Sandbox.create(named.snapshotId, { timeoutMs: 900_000, ...slow }))
check('Sandbox.create(snapshotId) starts a sandbox', (await fromSnap.commands.run('echo started')).stdout === 'started\n')
check('its getInfo names the snapshot as template', (await fromSnap.getInfo()).templateId === named.snapshotId)

if (checkFiles) {
  check('a sandbox started from the snapshot has the source\'s file', (await fromSnap.files.read('state.txt')) === state)
  await sbx.files.write('after.txt', 'after the snapshot')
  check('a write to the source after the snapshot is not in it', !(await fromSnap.files.exists('after.txt')))
}

const forks = await timed(`fork of ${forkCount}`, () => sbx.fork({ count: forkCount, timeoutMs: 900_000, ...slow }))
check(`fork({count: ${forkCount}}) answers ${forkCount} sandboxes`, forks.length === forkCount && forks.every((f) => f instanceof Sandbox), String(forks))
check('forks have their own IDs', new Set([sbx.sandboxId, ...forks.map((f) => f.sandboxId)]).size === forkCount + 1)
await Promise.all(forks.map(async (f, i) => {
  check(`fork ${i} runs commands`, (await f.commands.run(`echo fork ${i}`)).stdout === `fork ${i}\n`)
  check(`fork ${i} keeps the source's metadata`, (await f.getInfo()).metadata.run === run)
  if (checkFiles) {
    check(`fork ${i} has the source's files`, (await f.files.read('state.txt')) === state && (await f.files.read('after.txt')) === 'after the snapshot')
    await f.files.write('mine.txt', `fork ${i}`)
  }
}))
if (checkFiles) {
  // Each fork reads back only its own write: no fork shares a filesystem with another or the source.
  for (const [i, f] of forks.entries()) check(`fork ${i}'s write is its own`, (await f.files.read('mine.txt')) === `fork ${i}`)
  check("the forks' writes are not in the source", !(await sbx.files.exists('mine.txt')))
}
check("the fork's snapshot is not listed", (await all(sbx.listSnapshots())).length === 2)
const one = await Sandbox.fork(sbx.sandboxId, { timeoutMs: 900_000, ...slow })
check('Sandbox.fork(id) answers one sandbox by default', one.length === 1 && one[0] instanceof Sandbox, String(one))
await throws('fork of an unknown sandbox', () => Sandbox.fork('nosuchsandbox'), (e) => e instanceof SandboxNotFoundError)

// Another namespace's key.
check("another namespace's key lists none", (await Sandbox.listSnapshots(other).nextItems()).length === 0)
await throws("another namespace's key cannot start from the snapshot", () => Sandbox.create(named.snapshotId, other), (e) => /not found/i.test(String(e)))
await throws("another namespace's key cannot start from the unnamed snapshot", () => Sandbox.create(unnamed.snapshotId, other), (e) => /not found/i.test(String(e)))
check("another namespace's key cannot delete the snapshot", (await Sandbox.deleteSnapshot(unnamed.snapshotId, other)) === false)
await throws("another namespace's key cannot fork the sandbox", () => Sandbox.fork(sbx.sandboxId, other), (e) => e instanceof SandboxNotFoundError)
await throws("another namespace's key cannot snapshot the sandbox", () => Sandbox.createSnapshot(sbx.sandboxId, other), (e) => e instanceof SandboxNotFoundError)

// A capture that fails (the integration tier plays it).
let failing = null
if (process.env.FAIL_KEY) {
  failing = await Sandbox.create(template, { metadata: { [process.env.FAIL_KEY]: 'fail' } })
  await throws('a failed capture throws its error', () => failing.createSnapshot(), (e) => e instanceof SandboxError && /500: .*FIFO/.test(e.message))
  await throws('a fork whose capture fails throws its error', () => failing.fork({ count: 2 }), (e) => e instanceof SandboxError && /FIFO/.test(e.message))
}

check('deleteSnapshot', (await Sandbox.deleteSnapshot(named.snapshotId)) === true)
check('deleteSnapshot again is false', (await Sandbox.deleteSnapshot(named.snapshotId)) === false)
check('deleteSnapshot of the unnamed one', (await Sandbox.deleteSnapshot(unnamed.snapshotId)) === true)
check('a sandbox started from a deleted snapshot keeps running', (await fromSnap.commands.run('echo still')).stdout === 'still\n')
await throws('create from a deleted snapshot', () => Sandbox.create(named.snapshotId), (e) => /not found/i.test(String(e)))

for (const s of [sbx, fromSnap, failing, ...forks, ...one]) if (s) await s.kill()
console.log(`all checks passed (${passed()})`)
