// Drives network.rules (header transforms) through the front door with the unmodified SDK named by
// E2B_PKG: create with a rule, getInfo without the values, a refused rule, updateNetwork replacing
// the rule, and another namespace's key refused. Prints "SANDBOX <id>" for the Go side, which
// checks the Secret, one line per check, and "all checks passed" at the end.
const { Sandbox, ALL_TRAFFIC, SandboxError, SandboxNotFoundError } = await import(process.env.E2B_PKG)
const { check, passed, throws } = await import('./check.mjs')

const other = { apiKey: process.env.OTHER_KEY }

const sbx = await Sandbox.create('base', {
  timeoutMs: 300_000,
  network: {
    allowOut: ['api.example.test'],
    denyOut: [ALL_TRAFFIC],
    rules: { 'API.example.test': [{ transform: { headers: { Authorization: 'Bearer sk-first' } } }] },
  },
})
console.log(`SANDBOX ${sbx.sandboxId}`)

let info = await sbx.getInfo()
check('getInfo shows the rule, domain lowercased',
  JSON.stringify(info.network?.rules) === JSON.stringify({ 'api.example.test': [{ transform: { headers: { Authorization: '[redacted]' } } }] }),
  JSON.stringify(info.network))
check('getInfo never shows the value', !JSON.stringify(info).includes('sk-first'), JSON.stringify(info))

await throws('a placeholder value is refused, naming the field',
  () => Sandbox.create('base', { network: { rules: { 'a.example.test': [{ transform: { headers: { A: 'Bearer ${e2b.secrets.k}' } } }] } } }),
  (e) => e instanceof SandboxError && String(e).includes('network.rules["a.example.test"].transform.headers["A"]'))
await throws('two transforms for a domain are refused',
  () => sbx.updateNetwork({ rules: { 'a.example.test': [{ transform: { headers: { A: '1' } } }, { transform: { headers: { B: '2' } } }] } }),
  (e) => e instanceof SandboxError && String(e).includes('more than one transform'))

await sbx.updateNetwork({
  allowOut: ['api.example.test'],
  denyOut: [ALL_TRAFFIC],
  rules: { 'api.example.test': [{ transform: { headers: { Authorization: 'Bearer sk-second', 'X-Team': 'team-2' } } }] },
})
info = await sbx.getInfo()
check('getInfo after updateNetwork shows the new rule',
  JSON.stringify(info.network?.rules) === JSON.stringify({ 'api.example.test': [{ transform: { headers: { Authorization: '[redacted]', 'X-Team': '[redacted]' } } }] }),
  JSON.stringify(info.network))
check('getInfo after updateNetwork never shows the values', !/sk-second|team-2/.test(JSON.stringify(info)), JSON.stringify(info))

await throws("another namespace's key cannot replace the rules",
  () => Sandbox.updateNetwork(sbx.sandboxId, { rules: { 'api.example.test': [{ transform: { headers: { Authorization: 'Bearer stolen' } } }] } }, other),
  (e) => e instanceof SandboxNotFoundError)

console.log(`all checks passed (${passed()})`)
