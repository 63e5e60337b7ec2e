// A smoke run of the official TypeScript client (@modelcontextprotocol/client) against a real
// aql-mcp: tools, resources, prompts and an MCP-AQL operation that needs the user's confirmation,
// answered through the client's elicitation handler. Driven by tests/test_ts_client_e2e.py.
//
//   node ts_client_smoke.mjs   with the environment:
//     TS_CLIENT_PACKAGE  the installed package's directory (scripts/node.sh installs it)
//     MCP_URL, MCP_TOKEN the server's /mcp and a bearer token for it
//     MCP_MODE           "legacy", "auto", or a version to pin (e.g. 2026-07-28)
//     MCP_CONFIRM        what the elicitation handler answers: "accept" (confirm: true), "refuse"
//                        (accept with confirm: false), "decline" or "cancel"
//
// Prints one JSON summary on stdout. The era the client ended up on is part of it, and so is what
// went over the wire: both SDK clients quietly fall back to `initialize` when `server/discover`
// fails, so success alone would not show that the modern era was used.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const packageDir = process.env.TS_CLIENT_PACKAGE;
const sdk = createRequire(join(packageDir, 'package.json'))('@modelcontextprotocol/client');
const { version: sdkVersion } = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8'));
const mode = process.env.MCP_MODE ?? 'legacy';
const confirm = process.env.MCP_CONFIRM ?? 'accept';

// What the transport sent and got: the JSON-RPC method of each POST, the MRTR retry fields, the
// HTTP statuses and any session id. Bodies are not kept (the token is in no body, but keep it small).
const wire = { posts: [], statuses: [], sessionIds: [], retries: [] };
async function recordingFetch(input, init = {}) {
  const method = init.method ?? 'GET';
  if (method === 'POST' && typeof init.body === 'string') {
    const body = JSON.parse(init.body);
    for (const message of Array.isArray(body) ? body : [body]) {
      if (message.method) wire.posts.push(message.method);
      const params = message.params ?? {};
      if ('inputResponses' in params || 'requestState' in params) {
        wire.retries.push({
          method: message.method,
          inputResponseKeys: Object.keys(params.inputResponses ?? {}),
          requestState: typeof params.requestState === 'string',
        });
      }
    }
  }
  const response = await fetch(input, init);
  wire.statuses.push(`${method} ${response.status}`);
  const session = response.headers.get('mcp-session-id');
  if (session) wire.sessionIds.push(session);
  return response;
}

const asked = [];
const answers = {
  accept: { action: 'accept', content: { confirm: true } },
  refuse: { action: 'accept', content: { confirm: false } },
  decline: { action: 'decline' },
  cancel: { action: 'cancel' },
};

const client = new sdk.Client(
  { name: 'aql-mcp-ts-smoke', version: '1.0.0' },
  {
    capabilities: { elicitation: { form: {} } },
    ...(mode === 'legacy' ? {} : { versionNegotiation: { mode: mode === 'auto' ? 'auto' : { pin: mode } } }),
  },
);
client.setRequestHandler('elicitation/create', async (request) => {
  asked.push({ message: request.params.message, schema: request.params.requestedSchema });
  return answers[confirm];
});

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
const summary = {
  sdkVersion,
  era: client.getProtocolEra(),
  protocolVersion: client.getNegotiatedProtocolVersion(),
  server: client.getServerVersion()?.name,
};

const { tools } = await client.listTools();
summary.tools = tools.map((t) => t.name);
const called = await client.callTool({ name: 'test_simple_text', arguments: {} });
summary.toolCall = { isError: called.isError === true, text: text(called.content) };

const { resources } = await client.listResources();
summary.resources = resources.map((r) => r.uri);
const read = await client.readResource({ uri: 'test://static-text' });
summary.resourceRead = read.contents.map((c) => ({ uri: c.uri, text: c.text }));

const { prompts } = await client.listPrompts();
summary.prompts = prompts.map((p) => p.name);
const prompt = await client.getPrompt({ name: 'test_prompt_with_arguments', arguments: { arg1: 'one', arg2: 'two' } });
summary.prompt = prompt.messages.map((m) => ({ role: m.role, text: m.content.text }));

// A dangerous MCP-AQL operation: with `aql.confirm_with_elicitation` on, the server asks the user
// (in the modern era as an `input_required` result), and the client answers through its handler.
// A failure of the client itself is reported in the summary rather than thrown, so that the test
// shows what the client saw.
const collection = `smoke_${process.pid}`;
summary.collection = collection;
summary.created = await aql('mcp_aql_create', 'create_collection', { collection });
try {
  summary.deleted = await aql('mcp_aql_delete', 'delete_collection', { collection });
} catch (error) {
  summary.deleted = { thrown: { name: error.name, code: error.code, message: error.message } };
}
summary.asked = asked;
const listed = await aql('mcp_aql_read', 'list_collections', {});
summary.collections = (listed.envelope?.data?.items ?? []).map((item) => item.name);

await client.close();
summary.wire = wire;
process.stdout.write(`${JSON.stringify(summary)}\n`);
