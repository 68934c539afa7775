// Drives the front door's snapshot and fork calls with the unmodified SDK named by E2B_PKG.
// E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY point at it; OTHER_KEY is a key of another
// namespace; FAIL_KEY is the metadata key whose value "fail" makes a sandbox's captures fail.
// Prints one line per check and "all checks passed" at the end; exits 1 on the first failure.
const { Sandbox, SandboxError, SandboxNotFoundError } = await import(process.env.E2B_PKG)
const { check, passed, throws } = await import('./check.mjs')

const other = { apiKey: process.env.OTHER_KEY }
const run = `snap-${process.pid}-${Date.now()}`
const alias = `s${process.pid}`

async function all(paginator) {
  const out = []
  while (paginator.hasNext) out.push(...(await paginator.nextItems()))
  return out
}

const sbx = await Sandbox.create('base', { metadata: { run }, timeoutMs: 300_000 })
await sbx.files.write('state.txt', 'before the snapshot')

const unnamed = await sbx.createSnapshot()
check('createSnapshot answers <id>:default and no names', /^[a-z0-9]+:default$/.test(unnamed.snapshotId) && unnamed.names.length === 0, JSON.stringify(unnamed))
const named = await Sandbox.createSnapshot(sbx.sandboxId, { name: `${alias}:v1` })
check('createSnapshot with a name answers <namespace>/<name>:<tag>', named.snapshotId.endsWith(`/${alias}:v1`) && named.names.length === 1 && named.names[0] === named.snapshotId.slice(0, -3), JSON.stringify(named))
await throws('createSnapshot of an unknown sandbox', () => Sandbox.createSnapshot('nosuchsandbox'), (e) => e instanceof SandboxNotFoundError)

const mine = await all(sbx.listSnapshots())
check("sbx.listSnapshots lists the sandbox's snapshots", mine.length === 2 && mine.some((s) => s.snapshotId === named.snapshotId), JSON.stringify(mine))
const paged = await all(Sandbox.listSnapshots({ sandboxId: sbx.sandboxId, limit: 1 }))
check('listSnapshots pages', paged.length === 2 && paged[0].snapshotId !== paged[1].snapshotId, JSON.stringify(paged))
const byName = await Sandbox.listSnapshots({ name: alias }).nextItems()
check('listSnapshots by name', byName.length === 1 && byName[0].snapshotId === named.snapshotId, JSON.stringify(byName))

const fromSnap = await Sandbox.create(named.snapshotId, { timeoutMs: 300_000 })
check('Sandbox.create(snapshotId) starts a sandbox', (await fromSnap.commands.run('echo started')).stdout === 'started\n')
check('its getInfo names the snapshot as template', (await fromSnap.getInfo()).templateId === named.snapshotId)

const forks = await sbx.fork({ count: 2, timeoutMs: 120_000 })
check('fork({count: 2}) answers two sandboxes', forks.length === 2 && forks.every((f) => f instanceof Sandbox), String(forks))
check('forks have their own IDs', new Set([sbx.sandboxId, ...forks.map((f) => f.sandboxId)]).size === 3)
for (const [i, f] of forks.entries()) {
  check(`fork ${i} runs commands`, (await f.commands.run(`echo fork ${i}`)).stdout === `fork ${i}\n`)
  check(`fork ${i} keeps the source's metadata`, (await f.getInfo()).metadata.run === run)
}
check("the fork's snapshot is not listed", (await all(sbx.listSnapshots())).length === 2)
const one = await Sandbox.fork(sbx.sandboxId)
check('Sandbox.fork(id) answers one sandbox by default', one.length === 1 && one[0] instanceof Sandbox, String(one))
await throws('fork of an unknown sandbox', () => Sandbox.fork('nosuchsandbox'), (e) => e instanceof SandboxNotFoundError)

// Another namespace's key.
check("another namespace's key lists none", (await Sandbox.listSnapshots(other).nextItems()).length === 0)
await throws("another namespace's key cannot start from the snapshot", () => Sandbox.create(named.snapshotId, other), (e) => /not found/i.test(String(e)))
check("another namespace's key cannot delete the snapshot", (await Sandbox.deleteSnapshot(unnamed.snapshotId, other)) === false)
await throws("another namespace's key cannot fork the sandbox", () => Sandbox.fork(sbx.sandboxId, other), (e) => e instanceof SandboxNotFoundError)
await throws("another namespace's key cannot snapshot the sandbox", () => Sandbox.createSnapshot(sbx.sandboxId, other), (e) => e instanceof SandboxNotFoundError)

// A capture that fails.
const failing = await Sandbox.create('base', { metadata: { [process.env.FAIL_KEY]: 'fail' } })
await throws('a failed capture throws its error', () => failing.createSnapshot(), (e) => e instanceof SandboxError && /500: .*FIFO/.test(e.message))
await throws('a fork whose capture fails throws its error', () => failing.fork({ count: 2 }), (e) => e instanceof SandboxError && /FIFO/.test(e.message))

check('deleteSnapshot', (await Sandbox.deleteSnapshot(named.snapshotId)) === true)
check('deleteSnapshot again is false', (await Sandbox.deleteSnapshot(named.snapshotId)) === false)
check('deleteSnapshot of the unnamed one', (await Sandbox.deleteSnapshot(unnamed.snapshotId)) === true)
check('a sandbox started from a deleted snapshot keeps running', (await fromSnap.commands.run('echo still')).stdout === 'still\n')
await throws('create from a deleted snapshot', () => Sandbox.create(named.snapshotId), (e) => /not found/i.test(String(e)))

for (const s of [sbx, fromSnap, failing, ...forks, ...one]) await s.kill()
console.log(`all checks passed (${passed()})`)
