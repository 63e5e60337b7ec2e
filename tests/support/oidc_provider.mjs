// A real OpenID provider for the tests: panva's oidc-provider (OpenID Certified), configured here and
// nothing else of ours in the token path. Driven by tests/support/oidc.py, which installs the package
// with scripts/node.sh and starts this program.
//
//   node oidc_provider.mjs   with the environment:
//     OIDC_PROVIDER_PACKAGE   the installed package's directory (scripts/node.sh prints it)
//     OIDC_PROVIDER_SETTINGS  JSON: {port, certificate, key, client: {id, secret},
//                             introspector: {id, secret}, scopes: [...], algorithm}
//
// What it issues, all by the client_credentials grant (RFC 6749 §4.4) of one confidential client:
// - with `resource=<URL>` (RFC 8707 resource indicators): a JWT access token (RFC 9068, `typ: at+jwt`)
//   whose `aud` is that URL, signed with `algorithm` (RS256, PS256, ES256 or EdDSA), carrying the
//   requested scopes;
// - without a resource: an opaque token without an audience (the library's format for tokens that
//   name no resource server).
// Opaque tokens are answered by RFC 7662 introspection (the `introspector` client, a resource server,
// may introspect any token) and can be revoked (RFC 7009) by the client they were issued to.
// The JWKS publishes one key per algorithm, each with its `alg`, so a verifier picks keys by `kid`.
//
// Prints one JSON line on stdout once listening: {issuer, jwks_uri, token_endpoint,
// introspection_endpoint, revocation_endpoint}; everything else goes to stderr.
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const settings = JSON.parse(process.env.OIDC_PROVIDER_SETTINGS);
const packageDir = process.env.OIDC_PROVIDER_PACKAGE;
const { main } = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8'));
const { Provider } = await import(pathToFileURL(join(packageDir, main)).href);

const ALGORITHMS = ['RS256', 'PS256', 'ES256', 'EdDSA'];
if (!ALGORITHMS.includes(settings.algorithm)) {
  throw new Error(`algorithm must be one of ${ALGORITHMS.join(', ')}, not ${settings.algorithm}`);
}
const TOKEN_SECONDS = 600;

// A fresh key per algorithm and run: what a test verifies comes from this run's JWKS, never a file.
function signingKey(alg) {
  const [type, options] = {
    RS256: ['rsa', { modulusLength: 2048 }],
    PS256: ['rsa', { modulusLength: 2048 }],
    ES256: ['ec', { namedCurve: 'P-256' }],
    EdDSA: ['ed25519', {}],
  }[alg];
  const { privateKey } = generateKeyPairSync(type, options);
  return { ...privateKey.export({ format: 'jwk' }), kid: `${alg.toLowerCase()}-${randomUUID()}`, alg, use: 'sig' };
}

function client({ id, secret }, grantTypes, scope) {
  return {
    client_id: id,
    client_secret: secret,
    grant_types: grantTypes,
    response_types: [],
    redirect_uris: [],
    token_endpoint_auth_method: 'client_secret_basic',
    scope,
  };
}

const scope = settings.scopes.join(' ');
const issuer = `https://127.0.0.1:${settings.port}`;
// Named here rather than taken from the library's defaults: the line printed below promises them.
const routes = { jwks: '/jwks', token: '/token', introspection: '/token/introspection', revocation: '/token/revocation' };

const provider = new Provider(issuer, {
  clients: [client(settings.client, ['client_credentials'], scope), client(settings.introspector, [])],
  jwks: { keys: ALGORITHMS.map(signingKey) },
  // Static scopes: without a resource indicator oidc-provider keeps only the scopes it knows.
  scopes: ['openid', ...settings.scopes],
  routes,
  ttl: { ClientCredentials: TOKEN_SECONDS },
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    revocation: { enabled: true },
    introspection: {
      enabled: true,
      // The resource server's own client may ask about any token; a client about its own tokens.
      allowedPolicy: (ctx, caller, token) =>
        caller.clientId === settings.introspector.id || caller.clientId === token.clientId,
    },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => false,
      getResourceServerInfo: (ctx, resource) => ({
        scope,
        audience: resource,
        accessTokenTTL: TOKEN_SECONDS,
        accessTokenFormat: 'jwt',
        jwt: { sign: { alg: settings.algorithm } },
      }),
    },
  },
});

for (const event of ['server_error', 'grant.error', 'introspection.error', 'revocation.error']) {
  provider.on(event, (ctx, error) => console.error(`oidc-provider ${event}: ${error?.message ?? ctx?.message}`));
}

const tls = { cert: readFileSync(settings.certificate), key: readFileSync(settings.key) };
const server = createServer(tls, provider.callback());
server.listen(settings.port, '127.0.0.1', () => {
  const ready = {
    issuer,
    jwks_uri: `${issuer}${routes.jwks}`,
    token_endpoint: `${issuer}${routes.token}`,
    introspection_endpoint: `${issuer}${routes.introspection}`,
    revocation_endpoint: `${issuer}${routes.revocation}`,
  };
  process.stdout.write(`${JSON.stringify(ready)}\n`);
});

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
