// Pause and connect keep the running processes and their memory (snapshots.paddock.dev/suspend:
// memory on a gVisor template), driven by the unmodified SDK named by E2B_PKG, in two steps with
// the caller waiting in between for the checkpoint and the Pod's deletion (which the SDK cannot
// see: a paused sandbox is "paused" at once). E2B_STEP=pause creates a sandbox of E2B_TEMPLATE,
// writes a file outside the home volume, starts E2B_MEMORY_LOOP (a process that holds a random
// secret and a counter in memory only and writes them to /var/tmp/mem), pauses the sandbox and
// prints {"sandboxId", "secret", "count"} last. E2B_STEP=connect with E2B_SANDBOX_ID, E2B_SECRET
// and E2B_COUNT connects and checks that the file is there and that the same process goes on:
// the secret it holds, its counter past the paused one.
const { Sandbox } = await import(process.env.E2B_PKG)
const { check, passed } = await import('./check.mjs')

const slow = { requestTimeoutMs: 180_000 }

// loopState polls /var/tmp/mem until ok accepts it, for up to a minute; it returns the last state.
async function loopState (sbx, ok) {
  let state = { secret: '', count: -1, raw: '' }
  for (const deadline = Date.now() + 60_000; Date.now() < deadline;) {
    const r = await sbx.commands.run('cat /var/tmp/mem 2>/dev/null || true')
    const [secret, count] = r.stdout.trim().split(' ')
    state = { secret: secret || '', count: Number(count ?? -1), raw: r.stdout }
    if (ok(state)) return state
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  return state
}

if (process.env.E2B_STEP === 'pause') {
  const sbx = await Sandbox.create(process.env.E2B_TEMPLATE || 'base', { timeoutMs: 600_000 })
  const w = await sbx.commands.run(`printf 'kept\\n' > /var/tmp/agent-notes && chmod 0640 /var/tmp/agent-notes`)
  check('a write outside the volume', w.exitCode === 0, JSON.stringify(w))
  const loop = await sbx.commands.run(process.env.E2B_MEMORY_LOOP)
  check('the loop starts', loop.exitCode === 0, JSON.stringify(loop))
  const before = await loopState(sbx, (s) => s.secret !== '' && s.count > 0)
  check('the loop writes its state', before.count > 0, JSON.stringify(before))
  check('pause', (await sbx.pause()) === true)
  console.log(`all ${passed()} checks passed`)
  console.log(JSON.stringify({ sandboxId: sbx.sandboxId, secret: before.secret, count: before.count }))
} else {
  const sbx = await Sandbox.connect(process.env.E2B_SANDBOX_ID, slow)
  const paused = Number(process.env.E2B_COUNT)
  const after = await loopState(sbx, (s) => s.count > paused)
  check('the process runs on after connect', after.count > paused, `${JSON.stringify(after)}; paused at ${paused}`)
  check('with the secret it held in memory', after.secret === process.env.E2B_SECRET, `${after.secret} != ${process.env.E2B_SECRET}`)
  const notes = await sbx.commands.run('stat -c %a /var/tmp/agent-notes && cat /var/tmp/agent-notes')
  check('the file outside the volume', notes.stdout === '640\nkept\n', JSON.stringify(notes))
  await sbx.kill()
  console.log(`all ${passed()} checks passed`)
}
