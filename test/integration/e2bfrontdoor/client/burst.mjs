// Creates E2B_BURST sandboxes of E2B_TEMPLATE at once with the SDK named by E2B_PKG, runs `true`
// in each, and prints one JSON line: the IDs created, the create failures and the command
// failures; exits 1 if any create failed.
const { Sandbox } = await import(process.env.E2B_PKG)

const count = Number(process.env.E2B_BURST || '50')
const commandFailed = []
const results = await Promise.allSettled(Array.from({ length: count }, async () => {
  // The cold creates queue on the one node: wait as long as the dev router does (3 min), not the
  // SDK's default 60 s request timeout.
  const sbx = await Sandbox.create(process.env.E2B_TEMPLATE, { metadata: { run: 'burst' }, timeoutMs: 600_000, requestTimeoutMs: 240_000 })
  try {
    const r = await sbx.commands.run('true')
    if (r.exitCode !== 0) commandFailed.push(`${sbx.sandboxId}: true exited ${r.exitCode}`)
  } catch (e) {
    commandFailed.push(`${sbx.sandboxId}: ${e}${e.cause ? ` (cause: ${e.cause}${e.cause.cause ? `: ${e.cause.cause}` : ''})` : ''}`)
  }
  return sbx.sandboxId
}))
const failed = results.filter((r) => r.status === 'rejected').map((r) => String(r.reason))
console.log(JSON.stringify({ ids: results.filter((r) => r.status === 'fulfilled').map((r) => r.value), failed, commandFailed }))
process.exit(failed.length === 0 ? 0 : 1)
