// One step of the cluster's E2B network.rules test (test/e2e/cluster egress_rules_test.go) with the
// unmodified SDK named by E2B_PKG; the Go side runs the commands inside and reads the stand-in.
//   create:   a sandbox of E2B_TEMPLATE that reaches only api.example.test, whose requests get
//             "Authorization: RULE_VALUE"; prints "SANDBOX <id>".
//   attacker: a sandbox of E2B_TEMPLATE that reaches only example.test, with no rule; prints
//             "SANDBOX <id>".
//   update:   updateNetwork of E2B_SANDBOX_ID with RULE_VALUE as the new value.
//   curl:     sbx.commands.run of curl https://api.example.test<URL_PATH> in E2B_SANDBOX_ID, as
//             the README shows: no CA flag.
// After create and update, getInfo shows the rule with its value redacted and never the value.
// One line per check and "all checks passed" at the end; exits 1 on the first failure.
const { Sandbox, ALL_TRAFFIC } = await import(process.env.E2B_PKG)
const { check, passed } = await import('./check.mjs')

const value = process.env.RULE_VALUE ?? ''
const rules = { 'api.example.test': [{ transform: { headers: { Authorization: value } } }] }
const opts = { requestTimeoutMs: 240_000 }

async function infoHidesTheValue(id) {
  const info = await Sandbox.getInfo(id, opts)
  check('getInfo shows the rule with its value redacted',
    JSON.stringify(info.network?.rules) === JSON.stringify({ 'api.example.test': [{ transform: { headers: { Authorization: '[redacted]' } } }] }),
    JSON.stringify(info.network))
  check('getInfo never shows the value', value !== '' && !JSON.stringify(info).includes(value), JSON.stringify(info))
}

switch (process.argv[2]) {
  case 'create': {
    const sbx = await Sandbox.create(process.env.E2B_TEMPLATE, {
      ...opts, timeoutMs: 1_800_000, metadata: { run: 'egress-rules' },
      network: { allowOut: ['api.example.test'], denyOut: [ALL_TRAFFIC], rules },
    })
    console.log(`SANDBOX ${sbx.sandboxId}`)
    await infoHidesTheValue(sbx.sandboxId)
    break
  }
  case 'attacker': {
    const sbx = await Sandbox.create(process.env.E2B_TEMPLATE, {
      ...opts, timeoutMs: 1_800_000, metadata: { run: 'egress-rules-attacker' },
      network: { allowOut: ['example.test'], denyOut: [ALL_TRAFFIC] },
    })
    console.log(`SANDBOX ${sbx.sandboxId}`)
    const info = await Sandbox.getInfo(sbx.sandboxId, opts)
    check('the attacker sandbox has no rules', info.network?.rules === undefined || Object.keys(info.network.rules).length === 0, JSON.stringify(info.network))
    break
  }
  case 'update': {
    const id = process.env.E2B_SANDBOX_ID
    await Sandbox.updateNetwork(id, { allowOut: ['api.example.test'], denyOut: [ALL_TRAFFIC], rules }, opts)
    await infoHidesTheValue(id)
    break
  }
  case 'curl': {
    const sbx = await Sandbox.connect(process.env.E2B_SANDBOX_ID, opts)
    let r
    try {
      r = await sbx.commands.run(`curl -sS -m 10 https://api.example.test${process.env.URL_PATH}`, { timeoutMs: 60_000 })
    } catch (e) {
      r = e // CommandExitError carries exitCode, stdout and stderr
    }
    check('curl https://api.example.test with no CA flag', r.exitCode === 0 && r.stdout.includes('hello from api.example.test'),
      `exit ${r.exitCode}: ${r.stdout} ${r.stderr}`)
    break
  }
  default:
    check(`a known step (create, attacker, update, curl), got ${process.argv[2]}`, false)
}
console.log(`all checks passed (${passed()})`)
