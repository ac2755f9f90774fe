//! A `[servers.NAME]` table: how the server is reached (a stdio child or a
//! streamable-HTTP URL) and, for HTTP, its headers and OAuth settings.

use super::reader::{self, Table};
use crate::diagnostic::Diagnostic;
use crate::source::FileId;
use crate::spec::{OAuth, ServerSpec, Sp, Transport};
use toml::de::DeValue;

pub(super) fn read_server(
    file: FileId,
    name: Sp<String>,
    v: &reader::Value<'_>,
    diags: &mut Vec<Diagnostic>,
) -> Option<ServerSpec> {
    let DeValue::Table(table) = v.get_ref() else {
        return None;
    };
    let mut t = Table::new(
        file,
        format!("`[servers.{}]`", name.get_ref()),
        v.span(),
        table,
    );
    let builtin = t.str("builtin", diags);
    let others: Vec<&str> = [
        "command", "url", "args", "env", "cwd", "headers", "oauth", "roots", "sampling", "protocol",
    ]
    .into_iter()
    .filter(|k| t.has(k))
    .collect();
    let command = t.str("command", diags);
    let url = t.str("url", diags);
    let args = t
        .strings("args", diags)
        .into_iter()
        .map(Sp::into_inner)
        .collect();
    let env = t.string_map("env", diags);
    let cwd = t.str("cwd", diags);
    let headers = t.string_map("headers", diags);
    let headers_span = t.key_span("headers");
    let oauth_span = t.key_span("oauth");
    let oauth = match t.table("oauth", diags) {
        Some(o) => read_oauth(o, &headers, diags),
        None => OAuth::default(),
    };
    let roots = t.strings("roots", diags);
    let sampling = t.bool("sampling", diags).unwrap_or(false);
    let protocol = match t.str("protocol", diags) {
        None => crate::spec::Protocol::default(),
        Some(p) => match p.get_ref().as_str() {
            "2025-11-25" => crate::spec::Protocol::Initialize,
            "2026-07-28" => crate::spec::Protocol::Discover,
            "auto" => crate::spec::Protocol::Auto,
            other => {
                diags.push(
                    Diagnostic::error(
                        "server-transport",
                        file,
                        p.span(),
                        format!(
                            "unknown MCP protocol `{other}` for server `{}`",
                            name.get_ref()
                        ),
                    )
                    .label("not a protocol Switchyard speaks")
                    .help("`protocol` is `\"2025-11-25\"` (the default: the `initialize` handshake), `\"2026-07-28\"` (`server/discover`) or `\"auto\"` (the newer, else the older)"),
                );
                crate::spec::Protocol::default()
            }
        },
    };
    let description = t
        .str("description", diags)
        .map(Sp::into_inner)
        .unwrap_or_default();
    let stdio_keys = ["args", "env", "cwd"]
        .into_iter()
        .filter(|k| t.has(k))
        .collect::<Vec<_>>();
    t.finish(
        &[
            "command",
            "args",
            "env",
            "cwd",
            "url",
            "headers",
            "oauth",
            "roots",
            "sampling",
            "protocol",
            "description",
            "builtin",
        ],
        diags,
    );
    if let Some(b) = builtin {
        if b.get_ref() != "store" {
            diags.push(
                Diagnostic::error(
                    "server-transport",
                    file,
                    b.span(),
                    format!("unknown builtin server `{}`", b.get_ref()),
                )
                .label("not a builtin")
                .help("the builtin server is `store`: the long-term store's items, as tools"),
            );
            return None;
        }
        if let Some(k) = others.first() {
            diags.push(
                Diagnostic::error(
                    "server-transport",
                    file,
                    t.key_span(k).unwrap_or(b.span()),
                    format!("`{k}` does not apply to a builtin server"),
                )
                .label("with `builtin`")
                .help("a builtin server runs in process: remove it"),
            );
        }
        return Some(ServerSpec {
            name,
            transport: Transport::Store,
            description,
            roots: Vec::new(),
            sampling: false,
            protocol: crate::spec::Protocol::default(),
        });
    }
    if let (Some(span), true) = (&oauth_span, url.is_none()) {
        diags.push(
            Diagnostic::error(
                "server-transport",
                file,
                span.clone(),
                "`oauth` only applies to HTTP servers",
            )
            .label("ignored with `command`")
            .help("give a stdio server its credentials through `env`"),
        );
    }
    if let (Some(span), true) = (&headers_span, url.is_none()) {
        diags.push(
            Diagnostic::error(
                "server-transport",
                file,
                span.clone(),
                "`headers` only applies to HTTP servers",
            )
            .label("ignored with `command`")
            .help("give a stdio server what it needs through `env`"),
        );
    }
    let transport = match (command, url) {
        (Some(command), None) => Transport::Stdio {
            command,
            args,
            env,
            cwd,
        },
        (None, Some(url)) => {
            if let Some(k) = stdio_keys.first() {
                let span = t.key_span(k).unwrap_or(url.span());
                diags.push(
                    Diagnostic::error(
                        "server-transport",
                        file,
                        span,
                        format!("`{k}` only applies to stdio servers"),
                    )
                    .label("ignored with `url`")
                    .help("remove it, or start the server with `command` instead of `url`"),
                );
            }
            Transport::Http {
                url,
                headers,
                oauth: Box::new(oauth),
            }
        }
        (Some(command), Some(url)) => {
            diags.push(
                Diagnostic::error(
                    "server-transport",
                    file,
                    url.span(),
                    format!("server `{}` has both `command` and `url`", name.get_ref()),
                )
                .label("second transport")
                .help("a server is either a stdio child (`command`) or a streamable-HTTP endpoint (`url`), not both"),
            );
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            }
        }
        (None, None) => {
            diags.push(
                Diagnostic::error(
                    "server-transport",
                    file,
                    name.span(),
                    format!("server `{}` has neither `command` nor `url`", name.get_ref()),
                )
                .label("no transport")
                .help("add `command = \"...\"` for a stdio server or `url = \"http://...\"` for streamable HTTP"),
            );
            return None;
        }
    };
    Some(ServerSpec {
        name,
        transport,
        description,
        roots,
        sampling,
        protocol,
    })
}

/// `[servers.x.oauth]`: checked here for what cannot work together, so a graph that
/// loads has settings the flow can use.
fn read_oauth(
    mut t: Table<'_, '_>,
    headers: &[(String, String)],
    diags: &mut Vec<Diagnostic>,
) -> OAuth {
    let grant = t.str("grant", diags);
    let client_id = t.str("client_id", diags);
    let client_secret = t.str("client_secret", diags);
    let private_key = t.str("private_key", diags);
    let signing_algorithm = t.str("signing_algorithm", diags);
    let scopes = t.strings("scopes", diags);
    let client_metadata_url = t.str("client_metadata_url", diags);
    let id_token = t.str("id_token", diags);
    let idp_token_endpoint = t.str("idp_token_endpoint", diags);
    let idp_client_id = t.str("idp_client_id", diags);
    let assertion = t.str("assertion", diags);
    let assertion_file = t.str("assertion_file", diags);
    t.finish(
        &[
            "grant",
            "client_id",
            "client_secret",
            "private_key",
            "signing_algorithm",
            "scopes",
            "client_metadata_url",
            "id_token",
            "idp_token_endpoint",
            "idp_client_id",
            "assertion",
            "assertion_file",
        ],
        diags,
    );
    let mut problem = |span: std::ops::Range<usize>, message: String, help: &str| {
        diags.push(
            Diagnostic::error("bad-oauth", t.file, span, message)
                .label("here")
                .help(help.to_string()),
        );
    };
    let client_credentials = match &grant {
        Some(g) if g.get_ref() == "client_credentials" => true,
        Some(g)
            if ["authorization_code", "identity_assertion", "jwt_bearer"]
                .contains(&g.get_ref().as_str()) =>
        {
            false
        }
        Some(g) => {
            problem(
                g.span(),
                format!("unknown grant `{}` in {}", g.get_ref(), t.what),
                "`grant` is `authorization_code` (the default), `client_credentials`, `identity_assertion` or `jwt_bearer`",
            );
            false
        }
        None => false,
    };
    let identity_assertion = grant
        .as_ref()
        .is_some_and(|g| g.get_ref() == "identity_assertion");
    let identity = if identity_assertion {
        match (&id_token, &idp_token_endpoint, &client_id, &client_secret) {
            (Some(token), Some(endpoint), Some(_), Some(_)) => {
                Some(crate::spec::IdentityAssertion {
                    token_endpoint: endpoint.get_ref().clone(),
                    client_id: idp_client_id.as_ref().map(|c| c.get_ref().clone()),
                    id_token: token.get_ref().clone(),
                })
            }
            _ => {
                problem(
                    t.span.clone(),
                    format!(
                        "the `identity_assertion` grant in {} needs `id_token`, `idp_token_endpoint`, `client_id` and `client_secret`",
                        t.what
                    ),
                    "`id_token = \"${IDP_ID_TOKEN}\"` (the person's ID token), the identity provider's `idp_token_endpoint`, and this client's `client_id` and `client_secret` at the authorization server",
                );
                None
            }
        }
    } else {
        if let Some(k) = id_token
            .as_ref()
            .or(idp_token_endpoint.as_ref())
            .or(idp_client_id.as_ref())
        {
            problem(
                k.span(),
                format!(
                    "the identity provider's settings in {} need `grant = \"identity_assertion\"`",
                    t.what
                ),
                "`id_token`, `idp_token_endpoint` and `idp_client_id` are for cross-app access",
            );
        }
        None
    };
    let jwt_bearer = grant.as_ref().is_some_and(|g| g.get_ref() == "jwt_bearer");
    let workload = match (jwt_bearer, &assertion, &assertion_file) {
        (true, Some(token), None) => {
            Some(crate::spec::WorkloadToken::Value(token.get_ref().clone()))
        }
        (true, None, Some(path)) => Some(crate::spec::WorkloadToken::File {
            path: path.get_ref().clone(),
            root: std::path::PathBuf::new(),
        }),
        (true, Some(_), Some(path)) => {
            problem(
                path.span(),
                format!("{} has both `assertion` and `assertion_file`", t.what),
                "the workload's token is given one way: the token itself, or the file the platform keeps it in",
            );
            None
        }
        (true, None, None) => {
            problem(
                t.span.clone(),
                format!(
                    "the `jwt_bearer` grant in {} needs `assertion` or `assertion_file`",
                    t.what
                ),
                "`assertion = \"${WORKLOAD_JWT}\"` (the token itself), or `assertion_file = \"/var/run/secrets/tokens/mcp\"` (read at each grant)",
            );
            None
        }
        (false, _, _) => {
            if let Some(k) = assertion.as_ref().or(assertion_file.as_ref()) {
                problem(
                    k.span(),
                    format!(
                        "a workload's token in {} needs `grant = \"jwt_bearer\"`",
                        t.what
                    ),
                    "`assertion` and `assertion_file` are for workload identity federation",
                );
            }
            None
        }
    };
    if let Some((k, _)) = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
    {
        problem(
            t.span.clone(),
            format!("{} is given beside an `{k}` header", t.what),
            "a server gets either a token of its own in `headers` or OAuth, not both",
        );
    }
    if client_credentials && client_id.is_none() {
        problem(
            t.span.clone(),
            format!(
                "the `client_credentials` grant in {} needs `client_id`",
                t.what
            ),
            "add the client ID the authorization server issued, with `client_secret` or `private_key`",
        );
    }
    if client_credentials && client_secret.is_none() && private_key.is_none() {
        problem(
            t.span.clone(),
            format!(
                "the `client_credentials` grant in {} needs `client_secret` or `private_key`",
                t.what
            ),
            "add `client_secret = \"${SECRET}\"`, or `private_key = \"${KEY_PEM}\"` for private_key_jwt",
        );
    }
    if let (Some(secret), Some(_)) = (&client_secret, &private_key) {
        problem(
            secret.span(),
            format!("{} has both `client_secret` and `private_key`", t.what),
            "a client authenticates with one of them",
        );
    }
    if let (Some(key), false) = (&private_key, client_credentials) {
        problem(
            key.span(),
            format!(
                "`private_key` in {} needs `grant = \"client_credentials\"`",
                t.what
            ),
            "a signed client assertion is used for the client-credentials grant",
        );
    }
    if let (Some(secret), None) = (&client_secret, &client_id) {
        problem(
            secret.span(),
            format!("`client_secret` in {} needs `client_id`", t.what),
            "a secret belongs to a client registered beforehand; add its `client_id`",
        );
    }
    if let Some(alg) = &signing_algorithm
        && !["ES256", "ES384", "RS256"].contains(&alg.get_ref().as_str())
    {
        problem(
            alg.span(),
            format!(
                "unknown `signing_algorithm` `{}` in {}",
                alg.get_ref(),
                t.what
            ),
            "Switchyard signs with `ES256` (the default), `ES384` or `RS256`",
        );
    }
    // An HTTPS URL with a path (SEP-991), unless it reads the environment.
    if let Some(url) = &client_metadata_url
        && !url.get_ref().starts_with("${")
        && !url
            .get_ref()
            .strip_prefix("https://")
            .and_then(|rest| rest.split_once('/'))
            .is_some_and(|(host, path)| !host.is_empty() && !path.is_empty())
    {
        problem(
            url.span(),
            format!(
                "`client_metadata_url` in {} is not an HTTPS URL with a path",
                t.what
            ),
            "a client-ID metadata document is named by an `https://` URL with a path",
        );
    }
    OAuth {
        client_credentials,
        client_id: client_id.map(Sp::into_inner),
        client_secret: client_secret.map(Sp::into_inner),
        private_key: private_key.map(Sp::into_inner),
        signing_algorithm: signing_algorithm.map(Sp::into_inner),
        scopes: scopes.into_iter().map(Sp::into_inner).collect(),
        client_metadata_url: client_metadata_url.map(Sp::into_inner),
        identity,
        workload,
    }
}
