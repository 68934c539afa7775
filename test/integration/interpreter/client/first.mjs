// first.mjs times what a user of the unmodified @e2b/code-interpreter SDK waits for on a warm
// pool: Sandbox.create() with the SDK's default template, then the first runCode('1+1') result.
// test/e2e/cluster runs it once per sample, each on a freshly ready pool member, with
// E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY set. It prints one JSON line
// ({"createToFirstResultMs"}) and exits 1 when the result is not 2.
import { Sandbox } from '@e2b/code-interpreter'

const start = performance.now()
const sbx = await Sandbox.create({ timeoutMs: 5 * 60 * 1000 })
let first, createToFirstResultMs
try {
  first = await sbx.runCode('1+1')
  createToFirstResultMs = performance.now() - start
} finally {
  await sbx.kill()
}
if (first.text !== '2' || first.error) {
  console.log(`FAIL 1+1 gave ${JSON.stringify(first.toJSON())}`)
  process.exit(1)
}
console.log(JSON.stringify({ createToFirstResultMs }))
