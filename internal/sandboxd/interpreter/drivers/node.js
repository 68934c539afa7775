// Paddock's JavaScript kernel driver (internal/sandboxd/interpreter). sandboxd runs it with
// `node -e <this file>` and speaks JSON lines with it: requests arrive on fd 3, messages leave on
// fd 4 (see doc.go). Cells are evaluated by Node's own REPL evaluator, which keeps state between
// cells, supports top-level await and yields the last expression's value; console output becomes
// message streams, and output written straight to fd 1 and 2 is read by sandboxd up to the mark
// written there at the end of every cell.
'use strict'
const fs = require('node:fs')
const readline = require('node:readline')
const repl = require('node:repl')
const { Console } = require('node:console')
const { Writable, PassThrough } = require('node:stream')
const util = require('node:util')

const send = (msg) => fs.writeSync(4, JSON.stringify(msg) + '\n')

// trimStack drops the frames of Node's REPL and of this driver from a cell's stack trace.
const trimStack = (stack) =>
  stack
    .split('\n')
    .filter((l) => !/^\s+at .*(node:vm|node:repl|node:domain|\[eval\]|new Promise \(<anonymous>\))/.test(l))
    .join('\n')

const stream = (name) =>
  new Writable({
    decodeStrings: false,
    write(chunk, _enc, cb) {
      send({ type: name, text: typeof chunk === 'string' ? chunk : chunk.toString('utf8') })
      cb()
    },
  })
const console_ = new Console({ stdout: stream('stdout'), stderr: stream('stderr') })

// The REPL reads nothing from a stream: cells arrive through server.eval. Its input and output are
// idle pass-through streams so it never touches the process's stdin or stdout.
const server = repl.start({
  input: new PassThrough(),
  output: new Writable({ write: (_c, _e, cb) => cb() }),
  prompt: '',
  terminal: false,
  useGlobal: true,
  ignoreUndefined: true,
  breakEvalOnSigint: true,
})
globalThis.console = console_
// No SIGINT listener of our own: during a cell the REPL turns SIGINT into an interruption error,
// and a listener would make Node restore the default action (exit) while the REPL's evaluation
// removes listeners. sandboxd sends SIGINT only while a cell runs.

const display = (value) => {
  const text = typeof value === 'string' ? util.inspect(value) : util.inspect(value, { depth: 4 })
  send({ type: 'result', main: true, data: { 'text/plain': text } })
}

// The REPL reports a cell's exception (thrown, or a rejected top-level await) to its domain, not
// to the eval callback; the listener hands it to the running cell.
let failCell = null
server._domain.on('error', (e) => failCell && failCell(e))

const runCell = (code) =>
  new Promise((resolve) => {
    let finished = false
    let finish = (err, value) => {
      if (finished) return
      finished = true
      failCell = null
      if (err) {
        const e = err instanceof repl.Recoverable ? err.err : err
        send({
          type: 'error',
          name: (e && e.name) || 'Error',
          value: (e && e.message) || String(e),
          traceback: trimStack((e && e.stack) || String(e)),
        })
      } else if (value !== undefined) {
        display(value)
      }
      resolve()
    }
    failCell = (e) => finish(e)
    server.eval(code, server.context, 'cell', (err, value) => finish(err, value))
    if (!finished) {
      // The cell awaits: the REPL ends the wait at its own SIGINT event, which a non-terminal REPL
      // never emits on its own.
      const interrupt = () => server.emit('SIGINT')
      process.on('SIGINT', interrupt)
      const done = finish
      finish = (err, value) => {
        process.removeListener('SIGINT', interrupt)
        done(err, value)
      }
    }
  })

const withEnv = async (env, fn) => {
  const saved = {}
  for (const [k, v] of Object.entries(env)) {
    saved[k] = Object.prototype.hasOwnProperty.call(process.env, k) ? process.env[k] : undefined
    process.env[k] = v
  }
  try {
    await fn()
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k]
      else process.env[k] = v
    }
  }
}

const mark = (marker) => {
  const written = []
  for (const [name, fd] of [['stdout', 1], ['stderr', 2]]) {
    try {
      fs.writeSync(fd, marker)
      written.push(name)
    } catch {}
  }
  return written
}

const main = async () => {
  let marker = ''
  send({ type: 'ready' })
  const lines = readline.createInterface({ input: fs.createReadStream(null, { fd: 3 }), crlfDelay: Infinity })
  for await (const line of lines) {
    const req = JSON.parse(line)
    if (req.marker) marker = req.marker
    await withEnv(req.env || {}, () => runCell(req.code || ''))
    send({ type: 'done', marks: marker ? mark(marker) : [] })
  }
  process.exit(0)
}
main()
