// The official TypeScript client (@modelcontextprotocol/client) follows an MCP-AQL import as a
// 2026-07-28 task across three replicas: it starts the import on the first, polls `tasks/get` on the
// second and third in turn (as its `pollIntervalMs` asks), and in MODE=cancel sends `tasks/cancel`
// to the third once the import is past CANCEL_AT rows. Driven by tests/test_execution_tasks_replicas.py.
//
//   node ts_client_tasks.mjs   with the environment:
//     TS_CLIENT_PACKAGE  the installed package's directory (scripts/node.sh installs it)
//     MCP_URLS           the three replicas' /mcp, comma-separated; MCP_TOKEN a token all accept
//     COLLECTION         an existing collection; PAYLOAD_FILE the base64 NDJSON to import
//     MODE               "complete" or "cancel"; CANCEL_AT rows processed before cancelling
//
// Client 2.4.0 declares extensions and sends `tasks/get` / `tasks/cancel` (with `Mcp-Name: taskId`,
// SEP-2663's routing header) through its generic `request()`, but it has no result type for a
// CreateTaskResult: `callTool` rejects `resultType: "task"`. The task is therefore read from the
// wire, through the transport's `fetch`, and the rejection is part of the summary.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const sdk = createRequire(join(process.env.TS_CLIENT_PACKAGE, 'package.json'))('@modelcontextprotocol/client');
const urls = process.env.MCP_URLS.split(',');
const mode = process.env.MODE ?? 'complete';
const cancelAt = Number(process.env.CANCEL_AT ?? '0');
const EXTENSION = 'io.modelcontextprotocol/tasks';

// Any JSON object as a result (a Standard Schema that accepts what it is given).
const anyResult = { '~standard': { version: 1, vendor: 'aql-mcp-tests', validate: (value) => ({ value }) } };
const created = [];
const sent = [];

function tapped(replica) {
  return async (input, init = {}) => {
    const body = typeof init.body === 'string' ? JSON.parse(init.body) : null;
    const headers = new Headers(init.headers);
    if (body?.method) sent.push({ replica, method: body.method, mcpName: headers.get('mcp-name') });
    const response = await fetch(input, init);
    const type = response.headers.get('content-type') ?? '';
    if (body?.method === 'tools/call' && type.startsWith('application/json')) {
      const answer = await response.clone().json();
      if (answer.result?.resultType === 'task') created.push(answer.result);
    }
    return response;
  };
}

async function connect(replica) {
  const client = new sdk.Client(
    { name: 'aql-mcp-ts-tasks', version: '1.0.0' },
    { capabilities: { extensions: { [EXTENSION]: {} } }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
  );
  const transport = new sdk.StreamableHTTPClientTransport(new URL(urls[replica]), {
    requestInit: { headers: { authorization: `Bearer ${process.env.MCP_TOKEN}` } },
    fetch: tapped(replica),
  });
  await client.connect(transport);
  return client;
}

const clients = [await connect(0), await connect(1), await connect(2)];
const summary = { era: clients[0].getProtocolEra(), polls: [] };
const params = {
  collection: process.env.COLLECTION,
  file_content: readFileSync(process.env.PAYLOAD_FILE, 'utf8'),
  file_encoding: 'base64',
  file_mime_type: 'application/x-ndjson',
};
try {
  await clients[0].callTool({ name: 'mcp_aql_execute', arguments: { operation: 'execute_import', params } });
} catch (error) {
  summary.callError = { name: error.name, code: error.code, message: error.message };
}
summary.created = created[0];
const taskId = summary.created.taskId;
const processed = (task) => Number(/\((\d+) of \d+\)/.exec(task.statusMessage ?? '')?.[1] ?? 0);
const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

let task = summary.created;
for (let turn = 0; !['completed', 'failed', 'cancelled'].includes(task.status); turn += 1) {
  await pause(task.pollIntervalMs ?? 1000);
  const replica = 1 + (turn % 2);
  const before = sent.length;
  task = await clients[replica].request({ method: 'tasks/get', params: { taskId } }, anyResult);
  const request = sent.slice(before).find((entry) => entry.method === 'tasks/get');
  summary.polls.push({ replica, mcpName: request?.mcpName, task });
  if (mode === 'cancel' && summary.cancelledOn === undefined && processed(task) >= cancelAt) {
    await clients[2].request({ method: 'tasks/cancel', params: { taskId } }, anyResult);
    summary.cancelledOn = 2;
  }
}

for (const client of clients) await client.close();
process.stdout.write(`${JSON.stringify(summary)}\n`);
