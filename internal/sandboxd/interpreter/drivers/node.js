// Paddock's JavaScript kernel driver (internal/sandboxd/interpreter). sandboxd runs it with
// `node -e <this file>` and speaks JSON lines with it: requests arrive on fd 3, messages leave on
// fd 4 (see doc.go). Cells are evaluated by Node's own REPL evaluator, which keeps state between
// cells, supports top-level await and yields the last expression's value. Output goes to fd 1 and
// 2 (synchronous pipes on Linux), which sandboxd reads up to the mark written there at the end of
// every cell.
'use strict'
const fs = require('node:fs')
const readline = require('node:readline')
const repl = require('node:repl')
const { Writable, PassThrough } = require('node:stream')
const util = require('node:util')

const send = (msg) => fs.writeSync(4, JSON.stringify(msg) + '\n')

// trimStack drops the frames of Node's REPL and of this driver from a cell's stack trace.
const trimStack = (stack) =>
  stack
    .split('\n')
    .filter((l) => !/^\s+at .*(node:vm|node:repl|node:domain|\[eval\]|new Promise \(<anonymous>\))/.test(l))
    .join('\n')

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
// No SIGINT listener of our own: while a cell runs synchronously the REPL turns SIGINT into an
// interruption error, and a listener would make Node restore the default action (exit) while the
// REPL's evaluation removes listeners. Outside of that evaluation SIGINT may find the default
// action, so sandboxd interrupts with a request on fd 3 ({"interrupt": N}, N the cell's number),
// which this driver reads whenever its event loop is free (the cell awaits, or has ended) and
// acknowledges with N; only when no acknowledgement comes (synchronous code holds the event loop)
// does sandboxd send SIGINT.

const display = (value) => {
  const text = typeof value === 'string' ? util.inspect(value) : util.inspect(value, { depth: 4 })
  send({ type: 'result', main: true, data: { 'text/plain': text } })
}

// The REPL reports a cell's exception (thrown, or a rejected top-level await) to its domain, not
// to the eval callback; the listener hands it to the running cell.
let failCell = null
server._domain.on('error', (e) => failCell && failCell(e))

// interruptAwait ends the running cell's wait, while a cell awaits.
let interruptAwait = null

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
      interruptAwait = interrupt
      const done = finish
      finish = (err, value) => {
        process.removeListener('SIGINT', interrupt)
        interruptAwait = null
        done(err, value)
      }
    }
  })

// applyEnv takes a change of the sandbox's environment for good, before the kernel's first cell
// (a warm member was claimed after this kernel started).
const applyEnv = (setenv, unsetenv) => {
  for (const k of unsetenv || []) delete process.env[k]
  for (const [k, v] of Object.entries(setenv || {})) process.env[k] = v
}

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

// main reads requests as they come: cells, run one after another (sandboxd sends the next only
// after the last one's done), and interrupts, handled at once.
const main = () => {
  let marker = ''
  const queue = []
  let running = false
  let closed = false
  const next = async () => {
    if (running) return
    running = true
    while (queue.length) {
      const req = queue.shift()
      if (req.marker) marker = req.marker
      applyEnv(req.setenv, req.unsetenv)
      await withEnv(req.env || {}, () => runCell(req.code || ''))
      send({ type: 'done', marks: marker ? mark(marker) : [] })
    }
    running = false
    if (closed) process.exit(0)
  }
  send({ type: 'ready' })
  const lines = readline.createInterface({ input: fs.createReadStream(null, { fd: 3 }), crlfDelay: Infinity })
  lines.on('line', (line) => {
    const req = JSON.parse(line)
    if (req.interrupt) {
      // Read while the event loop is free: the cell awaits, or has ended.
      if (interruptAwait) interruptAwait()
      send({ type: 'interrupt_ack', cell: req.interrupt })
      return
    }
    queue.push(req)
    next()
  })
  lines.on('close', () => {
    closed = true
    if (!running) process.exit(0)
  })
}
main()
