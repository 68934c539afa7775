// Package interpreter is sandboxd's code interpreter: the HTTP service E2B's
// @e2b/code-interpreter SDK calls on port 49999 (GET /health, POST /execute answered as NDJSON,
// /contexts create, list, restart and delete), over kernels that keep state per context.
//
// A context is one kernel process: Python and Node run a driver embedded in this package
// (drivers/, passed with -c/-e, nothing written to disk), bash runs a prelude then one shell
// command per cell. The driver reads one JSON request per line on fd 3 ({"code","env","marker"},
// with "setenv"/"unsetenv" when the sandbox's environment changed before the kernel's first
// cell, and for JavaScript {"interrupt": N}, N the cell's number in the kernel; bash reads shell commands on stdin) and writes
// JSON messages on fd 4: ready, result ({"main", "data": MIME bundle}), error ({"name","value",
// "traceback"}), interrupt_ack ({"cell": N}) and done ({"marks": streams}).
// Output, the cell's and its child processes', goes to fd 1 and 2 (one pipe each, so in order),
// read here as stdout and stderr up to the random marker the driver writes there at the end of
// each cell, so a cell's output is complete when its end is sent.
//
// Contract:
//   - Kernels run as sandboxd's user, in their own process group, with Config.Environ (the
//     environment the sandbox's commands get: no sandbox or control token); per-call env_vars
//     are set inside the kernel for that cell and restored after it, as E2B does.
//   - The cells of one context run in order; contexts run in parallel, each in its own process,
//     so a cell that never ends holds only its own context.
//   - A client that goes away (the SDK's timeoutMs closes the connection) interrupts its cell
//     with SIGINT to the kernel's process group (JavaScript: an interrupt request on fd 3, and
//     SIGINT only when Node does not acknowledge it, that is while synchronous code runs, since a
//     SIGINT at other moments may meet Node's default action), then again after InterruptGrace,
//     and the kernel is killed and restarted only after twice that; an interrupted cell keeps the
//     context's state.
//   - A kernel that dies during a cell ends it with a KernelDied error and is restarted at once
//     (state lost); restart and delete end a running cell with ContextRestarting and
//     ExecutionAborted, as E2B's server does.
//   - Kernels start when first needed (the default Python one at Warm, which sandboxd calls as
//     it starts serving, on an unclaimed warm member too) and stop at Close. A kernel that has
//     run no cell yet takes the environment of the moment of its first cell: a claim's variables
//     that arrived after it started are set inside it (os.environ, process.env: what code and
//     the processes it starts see; /proc/self/environ keeps the start) or, for variables the
//     language reads only as it starts (PYTHON*, NODE_*, LD_*, LC_*, LANG, LANGUAGE, HOME) and
//     for bash, it is started again. A kernel that has run a cell keeps its environment.
//   - Handler authorizes nothing; sandboxd wraps it with the sandbox token check.
package interpreter
