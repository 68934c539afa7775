// ci.mjs drives the unmodified @e2b/code-interpreter SDK (client/package.json) against sandboxd's
// code interpreter in the SDK's debug mode (http://localhost:49999, no control plane).
// test/integration/interpreter runs it with TOKEN (the sandbox token), ROOT_DIR (the sandbox
// root), CLAIM_VALUE (a variable set through claim settings) and MODE: "locked" checks what an
// unclaimed warm member answers, "bench" prints runCode('1+1') figures, anything else runs every
// check. It prints "ok <check>" or "FAIL <check>: <reason>" per check and exits 1 on any failure.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { check, expect, failures, pngSize, rejects, show } from '../../checks.mjs'
import { InvalidArgumentError, NotFoundError, Sandbox, SandboxError, TimeoutError } from '@e2b/code-interpreter'

const token = process.env.TOKEN
const root = process.env.ROOT_DIR
const connect = (tok) =>
  new Sandbox({ sandboxId: 'debug_sandbox_id', envdAccessToken: tok, trafficAccessToken: tok, debug: true })
const sbx = connect(token)

if (process.env.MODE === 'locked') {
  await check('an unclaimed warm member refuses the sandbox token', async () => {
    const err = await rejects(sbx.runCode('1+1'), SandboxError, 'runCode')
    expect(err.message.startsWith('403'), err.message)
    const list = await rejects(sbx.listCodeContexts(), SandboxError, 'listCodeContexts')
    expect(list.message.startsWith('403'), list.message)
  })
  process.exit(failures() ? 1 : 0)
}

if (process.env.MODE === 'bench') {
  await sbx.runCode('1+1')
  const n = 300
  const times = []
  for (let i = 0; i < n; i++) {
    const t0 = performance.now()
    const e = await sbx.runCode('1+1')
    times.push(performance.now() - t0)
    if (e.text !== '2') throw new Error(`runCode('1+1') = ${e.text}`)
  }
  times.sort((a, b) => a - b)
  const q = (p) => times[Math.min(n - 1, Math.floor(p * n))].toFixed(2)
  console.log(`runCode('1+1') through the SDK, ${n} calls: p50 ${q(0.5)} ms, p99 ${q(0.99)} ms`)
  process.exit(0)
}

await check('the value of the last expression, state and the execution count', async () => {
  const a = await sbx.runCode('x = 1\nx + 1')
  expect(a.text === '2' && a.results.length === 1 && a.results[0].isMainResult, `results ${show(a.results)}`)
  expect(a.error === undefined, `error ${show(a.error)}`)
  const b = await sbx.runCode('x')
  expect(b.text === '1', `x is ${b.text} in the next call`)
  expect(b.executionCount === a.executionCount + 1, `execution counts ${a.executionCount} then ${b.executionCount}`)
  expect((await sbx.runCode("'quoted'")).text === 'quoted', 'a str result keeps its quotes')
})

await check('stdout and stderr stream to the callbacks while the cell runs', async () => {
  const flag = join(root, 'streamed')
  const out = []
  const err = []
  // The cell waits until the callback has seen its first line: output that arrived only at the
  // end would leave it waiting until timeoutMs.
  const e = await sbx.runCode(
    `import os, sys, time\nprint('first')\nwhile not os.path.exists(${show(flag)}): time.sleep(0.01)\nprint('hé ✓', file=sys.stderr)`,
    {
      timeoutMs: 30000,
      onStdout: (m) => {
        out.push(m)
        if (m.line.includes('first')) writeFileSync(flag, '')
      },
      onStderr: (m) => err.push(m),
    },
  )
  expect(out.length === 1 && out[0].line === 'first\n' && out[0].error === false, `stdout ${show(out)}`)
  expect(err.length === 1 && err[0].line === 'hé ✓\n' && err[0].error === true, `stderr ${show(err)}`)
  expect(show(e.logs) === show({ stdout: ['first\n'], stderr: ['hé ✓\n'] }), `logs ${show(e.logs)}`)
})

await check('exceptions are returned with name, value and traceback, not thrown', async () => {
  const errors = []
  const e = await sbx.runCode('def f():\n    return 1/0\nf()', { onError: (x) => errors.push(x) })
  expect(e.error?.name === 'ZeroDivisionError' && e.error.value === 'division by zero', `error ${show(e.error)}`)
  expect(e.error.traceback.includes('return 1/0'), `traceback ${e.error.traceback}`)
  expect(errors.length === 1, `onError calls ${errors.length}`)
})

await check('display() gives several results and rich formats', async () => {
  const seen = []
  const e = await sbx.runCode(
    "class Rich:\n    def _repr_html_(self): return '<b>rich</b>'\n    def _repr_markdown_(self): return '**rich**'\n    def _repr_svg_(self): return '<svg></svg>'\n    def _repr_latex_(self): return r'$\\alpha$'\n    def _repr_json_(self): return {'k': [1, 2]}\ndisplay('one')\ndisplay(Rich())\n3",
    { onResult: (r) => seen.push(r) },
  )
  expect(e.results.length === 3 && seen.length === 3, `results ${show(e.results)}`)
  const [one, rich, main] = e.results
  expect(one.text === 'one' && !one.isMainResult, `first ${show(one)}`)
  expect(rich.html === '<b>rich</b>' && rich.markdown === '**rich**' && rich.svg === '<svg></svg>' && rich.latex === '$\\alpha$', `rich ${show(rich)}`)
  expect(show(rich.json) === show({ k: [1, 2] }), `json ${show(rich.json)}`)
  expect(show(rich.formats()) === show(['html', 'markdown', 'svg', 'latex', 'json']), `formats ${show(rich.formats())}`)
  expect(main.isMainResult && e.text === '3', `main ${show(main)}`)
})

await check('a matplotlib figure as PNG with its chart', async () => {
  const e = await sbx.runCode(
    "import matplotlib.pyplot as plt\nplt.figure(figsize=(4, 3), dpi=100)\nplt.plot([1, 2, 3], [2, 4, 8], label='growth')\nplt.title('Growth')\nplt.xlabel('day')\nplt.ylabel('size (cm)')\nplt.show()",
  )
  expect(e.error === undefined, `error ${show(e.error)}`)
  expect(e.results.length === 1, `results ${e.results.length}`)
  const r = e.results[0]
  expect(r.text === '<Figure size 400x300 with 1 Axes>', `text ${r.text}`)
  expect(show(r.formats()) === show(['png']), `formats ${show(r.formats())}`)
  const [w, h] = pngSize(r.png)
  // As IPython's inline backend, bbox_inches='tight' fits the 400x300 canvas to what is drawn.
  expect(Math.abs(w - 400) < 100 && Math.abs(h - 300) < 75, `png ${w}x${h}, want about 400x300`)
  const c = r.chart
  expect(c.type === 'line' && c.title === 'Growth' && c.x_label === 'day' && c.y_unit === 'cm', `chart ${show(c)}`)
  expect(show(c.elements) === show([{ label: 'growth', points: [[1, 2], [2, 4], [3, 8]] }]), `elements ${show(c.elements)}`)
})

await check('bar, pie, scatter and box charts', async () => {
  const chart = async (code) => (await sbx.runCode(`import matplotlib.pyplot as plt\n${code}\nplt.show()`)).results[0]?.chart
  const bar = await chart("plt.bar(['a', 'b'], [1, 2])")
  expect(bar.type === 'bar' && show(bar.elements.map((x) => [x.label, x.value])) === show([['a', 1], ['b', 2]]), `bar ${show(bar)}`)
  const pie = await chart("plt.pie([1, 1], labels=['x', 'y'])")
  expect(pie.type === 'pie' && show(pie.elements.map((x) => [x.label, x.angle])) === show([['x', 180], ['y', 180]]), `pie ${show(pie)}`)
  const scatter = await chart('plt.scatter([1, 2], [3, 4])')
  expect(scatter.type === 'scatter' && show(scatter.elements[0].points) === show([[1, 3], [2, 4]]), `scatter ${show(scatter)}`)
  const box = await chart("plt.boxplot([[1, 2, 3, 4, 5]], labels=['b'], patch_artist=True)")
  expect(box.type === 'box_and_whisker' && box.elements[0].median === 3 && box.elements[0].min === 1 && box.elements[0].max === 5, `box ${show(box)}`)
})

await check('a pandas DataFrame as text, HTML and data', async () => {
  const e = await sbx.runCode("import pandas as pd\npd.DataFrame({'city': ['Oslo', 'Lima'], 'temp': [3.5, 19.0]})")
  const r = e.results[0]
  expect(r.isMainResult && r.html.includes('<table') && r.html.includes('Oslo'), `html ${r.html}`)
  expect(r.text.includes('city') && r.text.includes('Lima'), `text ${r.text}`)
  expect(show(r.data) === show({ city: ['Oslo', 'Lima'], temp: [3.5, 19] }), `data ${show(r.data)}`)
})

await check('contexts: create with cwd, isolation, list, restart, remove', async () => {
  const dir = join(root, 'ctx-dir')
  mkdirSync(dir, { recursive: true })
  const ctx = await sbx.createCodeContext({ cwd: dir, language: 'python' })
  expect(typeof ctx.id === 'string' && ctx.language === 'python' && ctx.cwd === dir, `context ${show(ctx)}`)
  const other = await sbx.createCodeContext()
  expect(other.cwd === root && other.language === 'python', `default context ${show(other)}`)
  expect((await sbx.runCode('import os\nos.getcwd()', { context: ctx })).text === dir, 'cwd')
  await sbx.runCode('mine = 7', { context: ctx })
  const isolated = await sbx.runCode('mine', { context: other })
  expect(isolated.error?.name === 'NameError', `another context sees mine: ${show(isolated.error)}`)
  const list = await sbx.listCodeContexts()
  const langs = list.map((c) => c.language)
  expect(list.some((c) => c.id === ctx.id) && langs.includes('javascript') && langs.includes('python'), `list ${show(list)}`)
  await sbx.restartCodeContext(ctx)
  const after = await sbx.runCode('mine', { context: ctx })
  expect(after.error?.name === 'NameError', `state after restart: ${show(after)}`)
  await sbx.removeCodeContext(ctx.id)
  const gone = await rejects(sbx.runCode('1', { context: ctx }), NotFoundError, 'runCode in a removed context')
  expect(gone.message.includes(`Context ${ctx.id} not found`), gone.message)
  await rejects(sbx.restartCodeContext(ctx), NotFoundError, 'restart of a removed context')
  await rejects(sbx.removeCodeContext(ctx), NotFoundError, 'removal of a removed context')
  await rejects(sbx.runCode('1', { context: other, language: 'python' }), InvalidArgumentError, 'context and language')
})

await check('javascript with top-level await, and state', async () => {
  const a = await sbx.runCode("const base = await new Promise((r) => setTimeout(() => r(40), 1))\nconsole.log('js out')\nbase + 2", { language: 'js' })
  expect(a.text === '42' && show(a.logs.stdout) === show(['js out\n']), `js ${show(a)}`)
  expect((await sbx.runCode('base', { language: 'javascript' })).text === '40', 'js state')
  const err = await sbx.runCode('undefinedThing', { language: 'js' })
  expect(err.error?.name === 'ReferenceError', `js error ${show(err.error)}`)
  const ctx = await sbx.createCodeContext({ language: 'js' })
  expect(ctx.language === 'javascript', `js context ${show(ctx)}`)
  const iso = await sbx.runCode('typeof base', { context: ctx })
  expect(iso.text === 'undefined', `a new js context sees base: ${iso.text}`)
})

await check('bash keeps its working directory and variables', async () => {
  await sbx.runCode('mkdir -p bash-dir && cd bash-dir && GREETING=hello', { language: 'bash' })
  const e = await sbx.runCode('echo "$GREETING from $(basename $PWD)"', { language: 'bash' })
  expect(show(e.logs.stdout) === show(['hello from bash-dir\n']), `bash ${show(e.logs)}`)
})

await check('other languages answer a clear error', async () => {
  const e = await sbx.runCode('1', { language: 'r' })
  expect(e.error?.name === 'UnsupportedLanguage' && e.error.value.includes('python, javascript (js) or bash'), `error ${show(e.error)}`)
  const err = await rejects(sbx.createCodeContext({ language: 'java' }), SandboxError, 'createCodeContext java')
  expect(err.message.startsWith('400'), err.message)
})

await check('envs apply to their call only; the claim environment is there', async () => {
  const e = await sbx.runCode("import os\nos.environ['ONLY_NOW']", { envs: { ONLY_NOW: 'yes' } })
  expect(e.text === 'yes', `with envs: ${e.text}`)
  const after = await sbx.runCode("import os\nos.environ.get('ONLY_NOW', 'unset')")
  expect(after.text === 'unset', `after: ${after.text}`)
  const js = await sbx.runCode('process.env.ONLY_NOW', { language: 'js', envs: { ONLY_NOW: 'js' } })
  expect(js.text === 'js', `js envs: ${js.text}`)
  const claim = await sbx.runCode("os.environ.get('CLAIM_VAR')")
  expect(claim.text === process.env.CLAIM_VALUE, `claim env: ${claim.text}`)
})

await check('timeoutMs interrupts the cell and the context keeps its state', async () => {
  const flag = join(root, 'sleeping')
  const run = sbx.runCode(`import time\nkept = 'still here'\nopen(${show(flag)}, 'w').close()\ntime.sleep(600)`, { timeoutMs: 2000 })
  await rejects(run, TimeoutError, 'a cell past its timeoutMs')
  expect(existsSync(flag), 'the cell did not start')
  const e = await sbx.runCode('kept')
  expect(e.text === 'still here' && e.error === undefined, `after the timeout: ${show(e)}`)
})

await check('a cell cannot read the sandbox token', async () => {
  const e = await sbx.runCode(
    "import os\nfound = []\nfor p in ['/proc/self/environ', '/proc/%d/environ' % os.getppid(), '/proc/%d/cmdline' % os.getppid()]:\n    try:\n        found.append(open(p, 'rb').read().decode('latin-1'))\n    except OSError:\n        pass\n" +
      `any(${show(token)} in f for f in found)`,
  )
  expect(e.text === 'False', `token visible to a cell: ${show(e)}`)
})

await check('a wrong token is refused', async () => {
  const err = await rejects(connect('not-the-token').runCode('1'), SandboxError, 'runCode with a wrong token')
  expect(err.message.startsWith('401'), err.message)
  await rejects(connect('not-the-token').listCodeContexts(), SandboxError, 'listCodeContexts with a wrong token')
})

if (failures()) {
  console.log(`${failures()} checks failed`)
  process.exit(1)
}
console.log('all checks passed')
// Exit now rather than when the runtime's idle keep-alive connections close.
process.exit(0)
