// client.mjs drives `paddock mcp` with the official MCP TypeScript client for the end-to-end
// tests: it connects (stdio: `node client.mjs stdio COMMAND ARGS...`; HTTP: `node client.mjs
// http URL`, bearer token in $MCP_TOKEN), lists the tools, calls the steps read as JSON from
// stdin ([{"tool": ..., "arguments": {...}}]) in one session, closes the session and prints
// {"server", "tools", "results"} as JSON, a result's images as {mimeType, data} (base64). The
// Go test asserts on that output.
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mode, target, ...rest] = process.argv.slice(2);
let transport;
if (mode === "stdio") {
  transport = new StdioClientTransport({ command: target, args: rest, env: process.env, stderr: "inherit" });
} else if (mode === "http") {
  transport = new StreamableHTTPClientTransport(new URL(target), {
    requestInit: { headers: { Authorization: `Bearer ${process.env.MCP_TOKEN}` } },
  });
} else {
  console.error("usage: client.mjs stdio COMMAND ARGS... | client.mjs http URL");
  process.exit(2);
}

const steps = JSON.parse(readFileSync(0, "utf8"));
const client = new Client({ name: "paddock-e2e", version: "1.0.0" });
await client.connect(transport);
const { tools } = await client.listTools();
const results = [];
for (const step of steps) {
  // callTool validates structuredContent against the tool's outputSchema, so a result that does
  // not match its documented schema fails here.
  const res = await client.callTool({ name: step.tool, arguments: step.arguments ?? {} });
  const text = (res.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
  const images = (res.content ?? []).filter((c) => c.type === "image").map((c) => ({ mimeType: c.mimeType, data: c.data }));
  results.push({ tool: step.tool, isError: res.isError === true, text, structured: res.structuredContent ?? null, images });
}
if (mode === "http") {
  await transport.terminateSession();
}
await client.close();
process.stdout.write(JSON.stringify({ server: client.getServerVersion(), tools, results }) + "\n");
