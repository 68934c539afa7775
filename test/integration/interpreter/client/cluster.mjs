// cluster.mjs drives the unmodified @e2b/code-interpreter SDK (client/package.json) through the E2B
// front door of a cluster, as a user would: E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY set, and
// Sandbox.create() with the SDK's default template, code-interpreter-v1. test/e2e/cluster runs it,
// with PNG_OUT, a file the chart's PNG is written to.
// It prints "ok <check>" or "FAIL <check>: <reason>" per check, then one JSON line of timings
// ({"createToFirstResultMs", "roundTripMs": [...]}), and exits 1 on any failure.
import { writeFileSync } from 'node:fs'
import { Sandbox, TimeoutError } from '@e2b/code-interpreter'
import { check, expect, failures, pngSize, show } from '../../checks.mjs'

const start = performance.now()
const sbx = await Sandbox.create({ timeoutMs: 10 * 60 * 1000 })
const first = await sbx.runCode('1+1')
const createToFirstResultMs = performance.now() - start
const timings = { sandboxId: sbx.sandboxId, createToFirstResultMs, roundTripMs: [] }

try {
  await check('create serves runCode at once', async () => {
    expect(first.text === '2' && !first.error, `1+1 gave ${show(first.toJSON())}`)
  })

  await check('state is kept between calls', async () => {
    const set = await sbx.runCode('x = 41\nprint("set")')
    expect(set.logs.stdout.join('') === 'set\n', `stdout ${show(set.logs)}`)
    const got = await sbx.runCode('x + 1')
    expect(got.text === '42', `x + 1 gave ${show(got.toJSON())}`)
  })

  await check('a pandas DataFrame comes back as a table', async () => {
    const r = await sbx.runCode("import pandas as pd\npd.DataFrame({'city': ['Oslo', 'Lima'], 'temp': [3.5, 19.0]})")
    const main = r.results.find((x) => x.isMainResult)
    expect(main, `no main result: ${show(r.toJSON())}`)
    expect(main.html?.includes('<table') && main.html.includes('Oslo'), `html ${main.html}`)
    expect(main.text?.includes('Lima'), `text ${main.text}`)
    expect(show(main.data?.temp) === '[3.5,19]', `data ${show(main.data)}`)
  })

  await check("matplotlib's first import uses the image's font cache and builds none", async () => {
    const r = await sbx.runCode('import logging\nlogging.basicConfig(level=logging.INFO)\nimport matplotlib.pyplot')
    expect(!r.error, `error ${show(r.error)}`)
    const stderr = r.logs.stderr.join('')
    expect(!stderr.includes('generated new fontManager'), `matplotlib built its font cache: ${stderr}`)
  })

  await check('a matplotlib chart is a PNG of the figure size, with its chart description', async () => {
    const r = await sbx.runCode(
      "import matplotlib.pyplot as plt\nplt.figure(figsize=(6, 4), dpi=100)\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('Squares')\nplt.show()")
    expect(!r.error, `error ${show(r.error)}`)
    const png = r.results.find((x) => x.png)
    expect(png, `no PNG among ${show(r.results.map((x) => x.formats()))}`)
    expect(png.text === '<Figure size 600x400 with 1 Axes>', `text ${png.text}`)
    // bbox_inches='tight', as IPython's inline backend: the canvas cut to what is drawn, plus
    // 0.1 in of padding on each side.
    const [w, h] = pngSize(png.png)
    expect(w >= 480 && w <= 620 && h >= 320 && h <= 420, `PNG is ${w}x${h}, want about 600x400`)
    expect(png.chart?.type === 'line' && png.chart.title === 'Squares', `chart ${show(png.chart)}`)
    if (process.env.PNG_OUT) writeFileSync(process.env.PNG_OUT, Buffer.from(png.png, 'base64'))
  })

  await check('timeoutMs interrupts a cell that never ends, and the context keeps its state', async () => {
    let threw
    try {
      await sbx.runCode('import time\nwhile True:\n    time.sleep(0.1)', { timeoutMs: 3000 })
    } catch (err) {
      threw = err
    }
    expect(threw instanceof TimeoutError, `got ${threw?.name}: ${threw?.message}, want TimeoutError`)
    const after = await sbx.runCode('x')
    expect(after.text === '41', `x after the interrupt gave ${show(after.toJSON())}`)
  })

  await check('javascript and bash contexts', async () => {
    const js = await sbx.runCode('const s = await Promise.resolve(20)\ns + 1', { language: 'js' })
    expect(js.text === '21', `js gave ${show(js.toJSON())}`)
    const sh = await sbx.runCode('echo "$HOME"', { language: 'bash' })
    expect(sh.logs.stdout.join('').trim() === '/home/user', `bash gave ${show(sh.toJSON())}`)
  })

  if (!failures()) {
    for (let i = 0; i < Number(process.env.ROUND_TRIPS ?? 0); i++) {
      const t = performance.now()
      await sbx.runCode('1+1')
      timings.roundTripMs.push(performance.now() - t)
    }
  }
} finally {
  await sbx.kill()
}
console.log(JSON.stringify(timings))
process.exit(failures() ? 1 : 0)
