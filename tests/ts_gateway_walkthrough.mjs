// The official TypeScript client (@modelcontextprotocol/client) walks through everything a user
// of aql-mcp does, through the gateway (nginx) in front of several replicas: tools, resources,
// prompts, an MCP-AQL write and a read of it, a delete the user confirms by elicitation, and
// notifications on its stream (the legacy session's GET stream, or a modern `subscriptions/listen`)
// caused by calls the gateway sends elsewhere, before and after a long call with progress. Driven by
// tests/test_gateway_clients.py, which runs the official Python client through the same steps and
// checks both summaries the same way.
//
//   node ts_gateway_walkthrough.mjs   with the environment:
//     TS_CLIENT_PACKAGE  the installed package's directory (scripts/node.sh installs it)
//     MCP_URL, MCP_TOKEN the gateway's /mcp and a bearer token for it
//     MCP_MODE           "legacy" (the 2025-11-25 handshake) or "auto" (probes 2026-07-28 first)
//     MCP_SLOW           JSON arguments of the long call (test_slow: steps, step_seconds)
//
// Prints one JSON summary on stdout. Every HTTP request carries an X-Request-Id of its own and the
// summary lists them, so the test can ask the replicas' access logs which one served each request.
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const sdk = createRequire(join(process.env.TS_CLIENT_PACKAGE, 'package.json'))('@modelcontextprotocol/client');
const mode = process.env.MCP_MODE ?? 'legacy';
const slowArguments = JSON.parse(process.env.MCP_SLOW ?? '{"steps": 2}');
const WATCHED = 'test://watched-resource';
const DEADLINE_MS = 20000;

// What went over the wire: each request's HTTP method, JSON-RPC method(s), tool name and
// X-Request-Id, its status, and any session id the server handed out.
const wire = { requests: [], sessionIds: [] };
async function recordingFetch(input, init = {}) {
  const requestId = randomUUID();
  const headers = new Headers(init.headers);
  headers.set('x-request-id', requestId);
  const entry = { http: init.method ?? 'GET', methods: [], name: null, id: requestId, status: null };
  if (typeof init.body === 'string') {
    const body = JSON.parse(init.body);
    for (const message of Array.isArray(body) ? body : [body]) {
      if (message.method) entry.methods.push(message.method);
      if (message.method === 'tools/call') entry.name = message.params.name;
      if ('result' in message || 'error' in message) entry.methods.push('(response)');
    }
  }
  wire.requests.push(entry);
  const response = await fetch(input, { ...init, headers });
  entry.status = response.status;
  const session = response.headers.get('mcp-session-id');
  if (session && !wire.sessionIds.includes(session)) wire.sessionIds.push(session);
  return response;
}

const asked = [];
const client = new sdk.Client(
  { name: 'aql-mcp-ts-gateway', version: '1.0.0' },
  {
    capabilities: { elicitation: { form: {} } },
    ...(mode === 'legacy' ? {} : { versionNegotiation: { mode } }),
  },
);
client.setRequestHandler('elicitation/create', async (request) => {
  asked.push({ message: request.params.message });
  return { action: 'accept', content: { confirm: true } };
});

// Notifications of the watched resource, handed to whoever waits for the next one.
const heard = [];
let onHeard = () => {};
client.setNotificationHandler('notifications/resources/updated', async (notification) => {
  heard.push(notification.params.uri);
  onHeard();
});
function nextNotification(count) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no notification ${count} within ${DEADLINE_MS} ms`)), DEADLINE_MS);
    onHeard = () => {
      if (heard.length >= count) {
        clearTimeout(timer);
        resolve();
      }
    };
    onHeard();
  });
}

const transport = new sdk.StreamableHTTPClientTransport(new URL(process.env.MCP_URL), {
  requestInit: { headers: { authorization: `Bearer ${process.env.MCP_TOKEN}` } },
  fetch: recordingFetch,
});

const text = (blocks) => blocks.filter((b) => b.type === 'text').map((b) => b.text).join('\n');
const aql = async (tool, operation, params) => {
  const result = await client.callTool({ name: tool, arguments: { operation, params } });
  return { isError: result.isError === true, envelope: result.structuredContent };
};

await client.connect(transport);
const summary = { era: client.getProtocolEra(), protocolVersion: client.getNegotiatedProtocolVersion() };

summary.tools = (await client.listTools()).tools.map((t) => t.name);
summary.resources = (await client.listResources()).resources.map((r) => r.uri);
summary.resourceText = text((await client.readResource({ uri: 'test://static-text' })).contents.map(
  (c) => ({ type: 'text', text: c.text }),
));
summary.prompts = (await client.listPrompts()).prompts.map((p) => p.name);
const prompt = await client.getPrompt({ name: 'test_prompt_with_arguments', arguments: { arg1: 'one', arg2: 'two' } });
summary.prompt = prompt.messages.map((m) => m.content.text);

// An MCP-AQL write, and a read of what it wrote.
const collection = `ts_${mode}_${process.pid}`;
summary.collection = collection;
await aql('mcp_aql_create', 'create_collection', { collection });
summary.written = await aql('mcp_aql_create', 'create_record', { collection, data: { title: 'via nginx', n: 1 } });
const id = summary.written.envelope?.data?.id;
summary.readBack = await aql('mcp_aql_read', 'get_record', { collection, id });

// A dangerous operation: the server asks the user, the elicitation handler confirms.
summary.deleted = await aql('mcp_aql_delete', 'delete_collection', { collection });
summary.asked = asked;
const listed = await aql('mcp_aql_read', 'list_collections', {});
summary.collectionsAfter = (listed.envelope?.data?.items ?? []).map((item) => item.name);

// A stream that hears changes: the legacy session's GET stream (opened by the transport after
// the handshake) with a resource subscription, or a modern listen stream. One change is heard
// before the long call and one after it, on the same stream.
let subscription = null;
if (summary.era === 'legacy') {
  await client.subscribeResource({ uri: WATCHED });
} else {
  subscription = await client.listen({ resourceSubscriptions: [WATCHED] });
}
summary.causes = [];
async function change() {
  const before = wire.requests.length;
  await client.callTool({ name: 'test_update_watched_resource', arguments: {} });
  const sent = wire.requests.slice(before).filter((r) => r.name === 'test_update_watched_resource');
  summary.causes.push(...sent.map((r) => r.id));
  await nextNotification(summary.causes.length);
}
await change();

// A call that runs longer than the gateway's read timeout, silent between its progress
// notifications for longer than that timeout: only the service's keep-alives hold it open.
const progress = [];
const slow = await client.callTool(
  { name: 'test_slow', arguments: slowArguments },
  { onprogress: (p) => progress.push(p.progress), timeout: 30000 },
);
summary.progress = progress;
summary.slow = { isError: slow.isError === true, text: text(slow.content) };

await change();
summary.heard = [...heard];

if (subscription) await subscription.close();
await client.close();
summary.wire = wire;
process.stdout.write(`${JSON.stringify(summary)}\n`);
