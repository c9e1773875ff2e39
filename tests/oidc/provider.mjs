// A real OpenID provider (the `oidc-provider` package) for the console's sign-in tests, on
// 127.0.0.1 only. Two people: `editor` (group link-editors) and `viewer` (group link-viewers);
// the login page takes the login and any password. Their groups, e-mail and name are in the ID
// token. Consent is taken as given for the one client, so the browser goes from the login page
// straight back to the node.
//
// Environment: PORT, CLIENT_ID, CLIENT_SECRET, REDIRECT_URIS and POST_LOGOUT_URIS (each
// comma-separated). Prints "listening <issuer>" once it answers.
import Provider from 'oidc-provider';

const port = Number(process.env.PORT);
const issuer = `http://127.0.0.1:${port}`;
const people = {
  editor: { email: 'ed@example.com', name: 'Ed Editor', groups: ['link-editors'] },
  viewer: { email: 'vi@example.com', name: 'Vi Viewer', groups: ['link-viewers'] },
};

const provider = new Provider(issuer, {
  clients: [{
    client_id: process.env.CLIENT_ID,
    client_secret: process.env.CLIENT_SECRET,
    redirect_uris: process.env.REDIRECT_URIS.split(','),
    post_logout_redirect_uris: process.env.POST_LOGOUT_URIS.split(','),
    response_types: ['code'],
    grant_types: ['authorization_code'],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'groups'],
  },
  // The claims of the granted scopes go into the ID token, which is all the node reads.
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  cookies: { keys: ['shortener-test-provider'] },
  features: {
    devInteractions: { enabled: true },
    rpInitiatedLogout: { enabled: true },
  },
  async findAccount(ctx, id) {
    const person = people[id];
    if (!person) {
      return undefined;
    }
    return {
      accountId: id,
      async claims() {
        return { sub: id, email_verified: true, ...person };
      },
    };
  },
  async loadExistingGrant(ctx) {
    const grant = new ctx.oidc.provider.Grant({
      clientId: ctx.oidc.client.clientId,
      accountId: ctx.oidc.session.accountId,
    });
    grant.addOIDCScope('openid email profile');
    await grant.save();
    return grant;
  },
});

provider.on('server_error', (ctx, error) => console.error('server_error', error));
provider.listen(port, '127.0.0.1', () => console.log(`listening ${issuer}`));
