// Pause and connect keep the root filesystem (snapshots.paddock.dev/suspend: rootfs on the
// template), driven by the unmodified SDK named by E2B_PKG, in two steps with the caller waiting
// in between for the capture and the Pod's deletion (which the SDK cannot see: a paused sandbox
// is "paused" at once). E2B_STEP=pause creates a sandbox of E2B_TEMPLATE, writes outside the home
// volume (a file in /var/tmp with mode 0640, a tool installed into the image's virtualenv), pauses it
// and prints {"sandboxId": ...} last. E2B_STEP=connect with E2B_SANDBOX_ID connects and checks
// that both are there, with their modes, and that the tool runs.
const { Sandbox } = await import(process.env.E2B_PKG)
const { check, passed } = await import('./check.mjs')

const slow = { requestTimeoutMs: 180_000 }
const state = `stat -c '%n %a' /var/tmp/agent-notes /opt/venv/bin/agent-tool && cat /var/tmp/agent-notes && /opt/venv/bin/agent-tool`
const want = '/var/tmp/agent-notes 640\n/opt/venv/bin/agent-tool 755\nkept\ninstalled-tool-ran\n'

if (process.env.E2B_STEP === 'pause') {
  const sbx = await Sandbox.create(process.env.E2B_TEMPLATE || 'base', { timeoutMs: 600_000 })
  const w = await sbx.commands.run(`set -e
printf 'kept\\n' > /var/tmp/agent-notes && chmod 0640 /var/tmp/agent-notes
printf '#!/bin/sh\\necho installed-tool-ran\\n' > /opt/venv/bin/agent-tool && chmod 0755 /opt/venv/bin/agent-tool`)
  check('writes outside the volume', w.exitCode === 0, JSON.stringify(w))
  const before = await sbx.commands.run(state)
  check('state before pause', before.stdout === want, JSON.stringify(before))
  check('pause', (await sbx.pause()) === true)
  console.log(`all ${passed()} checks passed`)
  console.log(JSON.stringify({ sandboxId: sbx.sandboxId }))
} else {
  const sbx = await Sandbox.connect(process.env.E2B_SANDBOX_ID, slow)
  const after = await sbx.commands.run(state)
  check('connect finds the root filesystem as it was paused', after.stdout === want, JSON.stringify(after))
  await sbx.kill()
  console.log(`all ${passed()} checks passed`)
}
