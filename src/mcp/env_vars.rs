//! `${NAME}` and `${NAME:-default}` in a server's `command`, `args`, `env` values,
//! `url`, headers and OAuth settings, expanded from the environment when the server starts, so one graph file can
//! point its servers somewhere else per run (a workspace directory, a port).

use super::error::McpError;
use crate::graph::{Server, ServerTransport};

/// The server as it is started: every `${...}` in its command, arguments, environment
/// values and URL replaced through `lookup` (the process environment, in use).
pub(crate) fn expand_server(
    server: &Server,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Server, McpError> {
    let fail = |key: &str, message: String| McpError::Spawn {
        server: server.name.clone(),
        message: format!("`{key}`: {message}"),
    };
    let transport = match &server.transport {
        ServerTransport::Stdio {
            command,
            args,
            env,
            env_remove,
            cwd,
        } => ServerTransport::Stdio {
            command: expand(command, lookup).map_err(|m| fail("command", m))?,
            args: args
                .iter()
                .map(|a| expand(a, lookup).map_err(|m| fail("args", m)))
                .collect::<Result<_, _>>()?,
            env: env
                .iter()
                .map(|(k, v)| Ok((k.clone(), expand(v, lookup).map_err(|m| fail("env", m))?)))
                .collect::<Result<_, McpError>>()?,
            env_remove: env_remove.clone(),
            cwd: cwd.clone(),
        },
        ServerTransport::Http {
            url,
            headers,
            oauth,
        } => ServerTransport::Http {
            url: expand(url, lookup).map_err(|m| fail("url", m))?,
            headers: headers
                .iter()
                .map(|(k, v)| {
                    Ok((
                        k.clone(),
                        expand(v, lookup).map_err(|m| fail("headers", m))?,
                    ))
                })
                .collect::<Result<_, McpError>>()?,
            oauth: {
                let one = |key: &str, v: &Option<String>| {
                    v.as_deref()
                        .map(|v| expand(v, lookup).map_err(|m| fail(&format!("oauth.{key}"), m)))
                        .transpose()
                };
                crate::spec::OAuth {
                    client_credentials: oauth.client_credentials,
                    client_id: one("client_id", &oauth.client_id)?,
                    client_secret: one("client_secret", &oauth.client_secret)?,
                    private_key: one("private_key", &oauth.private_key)?,
                    signing_algorithm: oauth.signing_algorithm.clone(),
                    scopes: oauth
                        .scopes
                        .iter()
                        .map(|s| expand(s, lookup).map_err(|m| fail("oauth.scopes", m)))
                        .collect::<Result<_, _>>()?,
                    client_metadata_url: one("client_metadata_url", &oauth.client_metadata_url)?,
                    identity: match &oauth.identity {
                        Some(i) => Some(crate::spec::IdentityAssertion {
                            token_endpoint: expand(&i.token_endpoint, lookup)
                                .map_err(|m| fail("oauth.idp_token_endpoint", m))?,
                            client_id: one("idp_client_id", &i.client_id)?,
                            id_token: expand(&i.id_token, lookup)
                                .map_err(|m| fail("oauth.id_token", m))?,
                        }),
                        None => None,
                    },
                    workload: match &oauth.workload {
                        Some(crate::spec::WorkloadToken::Value(v)) => {
                            Some(crate::spec::WorkloadToken::Value(
                                expand(v, lookup).map_err(|m| fail("oauth.assertion", m))?,
                            ))
                        }
                        Some(crate::spec::WorkloadToken::File { path, root }) => {
                            let path = expand(path, lookup)
                                .map_err(|m| fail("oauth.assertion_file", m))?;
                            Some(crate::spec::WorkloadToken::File {
                                path: root.join(path).display().to_string(),
                                root: root.clone(),
                            })
                        }
                        None => None,
                    },
                }
            },
        },
        ServerTransport::Store => ServerTransport::Store,
    };
    Ok(Server {
        name: server.name.clone(),
        transport,
        roots: server.roots.clone(),
        sampling: server.sampling,
        protocol: server.protocol,
    })
}

/// Expands `${NAME}` (the variable, which must be set) and `${NAME:-default}` (the
/// variable when set and not empty, else `default`); `$${` is a literal `${`. Any other
/// `$` stays as it is.
pub(crate) fn expand(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(literal) = after.strip_prefix("${") {
            out.push_str("${");
            rest = literal;
            continue;
        }
        let Some(inner) = after.strip_prefix('{') else {
            out.push('$');
            rest = after;
            continue;
        };
        let Some(end) = inner.find('}') else {
            return Err(format!(
                "`${{` without a closing `}}` in `{text}` (write `$${{` for a literal `${{`)"
            ));
        };
        let (name, default) = match inner[..end].split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (&inner[..end], None),
        };
        // `${A:-${B}}` would end at the first `}` and leave `}` behind: say so rather
        // than start the server with half-expanded text.
        if default.is_some_and(|d| d.contains("${")) {
            return Err(format!(
                "the default in `{text}` holds a `${{`: defaults are plain text, not nested variables"
            ));
        }
        if !is_name(name) {
            return Err(format!(
                "`${{{}}}` in `{text}` does not name an environment variable",
                &inner[..end]
            ));
        }
        match (
            lookup(name).filter(|v| !v.is_empty() || default.is_none()),
            default,
        ) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => {
                return Err(format!(
                    "the environment variable `{name}` is not set (write `${{{name}:-default}}` to give a default)"
                ));
            }
        }
        rest = &inner[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "WORKSPACE" => Some("/tmp/ws".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn variables_and_defaults_are_expanded() {
        assert_eq!(expand("${WORKSPACE}/notes", &env).unwrap(), "/tmp/ws/notes");
        assert_eq!(expand("${MISSING:-/tmp/x}", &env).unwrap(), "/tmp/x");
        assert_eq!(expand("${WORKSPACE:-/tmp/x}", &env).unwrap(), "/tmp/ws");
        assert_eq!(expand("${EMPTY:-d}", &env).unwrap(), "d");
        assert_eq!(expand("${EMPTY}", &env).unwrap(), "");
        assert_eq!(
            expand("a ${WORKSPACE} b ${MISSING:-}c", &env).unwrap(),
            "a /tmp/ws b c"
        );
    }

    #[test]
    fn other_dollars_stay_and_a_doubled_one_is_literal() {
        assert_eq!(expand("$HOME $5 cost$", &env).unwrap(), "$HOME $5 cost$");
        assert_eq!(expand("$${WORKSPACE}", &env).unwrap(), "${WORKSPACE}");
    }

    #[test]
    fn unset_variables_and_bad_syntax_are_errors() {
        assert_eq!(
            expand("${MISSING}", &env).unwrap_err(),
            "the environment variable `MISSING` is not set (write `${MISSING:-default}` to give a default)"
        );
        assert_eq!(
            expand("${WORKSPACE", &env).unwrap_err(),
            "`${` without a closing `}` in `${WORKSPACE` (write `$${` for a literal `${`)"
        );
        assert_eq!(
            expand("${1X}", &env).unwrap_err(),
            "`${1X}` in `${1X}` does not name an environment variable"
        );
        assert_eq!(
            expand("${X:-${WORKSPACE}}", &env).unwrap_err(),
            "the default in `${X:-${WORKSPACE}}` holds a `${`: defaults are plain text, not nested variables"
        );
    }

    #[test]
    fn an_oauth_setting_that_cannot_be_expanded_is_named() {
        let server = Server {
            name: "api".into(),
            transport: ServerTransport::Http {
                url: "http://127.0.0.1/mcp".into(),
                headers: Vec::new(),
                oauth: crate::spec::OAuth {
                    client_id: Some("c".into()),
                    client_secret: Some("${MISSING}".into()),
                    ..Default::default()
                },
            },
            roots: Vec::new(),
            sampling: false,
            protocol: Default::default(),
        };
        assert_eq!(
            expand_server(&server, &env).unwrap_err().to_string(),
            "cannot start server `api`: `oauth.client_secret`: the environment variable `MISSING` is not set (write `${MISSING:-default}` to give a default)"
        );
    }

    /// A workload's token file is read from the environment's path, or beside the
    /// graph when the path is relative.
    #[test]
    fn a_workload_token_file_is_found_beside_the_graph_or_where_the_environment_says() {
        let path_of = |path: &str| {
            let server = Server {
                name: "api".into(),
                transport: ServerTransport::Http {
                    url: "http://127.0.0.1/mcp".into(),
                    headers: Vec::new(),
                    oauth: crate::spec::OAuth {
                        workload: Some(crate::spec::WorkloadToken::File {
                            path: path.into(),
                            root: "/graphs".into(),
                        }),
                        ..Default::default()
                    },
                },
                roots: Vec::new(),
                sampling: false,
                protocol: Default::default(),
            };
            match expand_server(&server, &env).map(|s| s.transport) {
                Ok(ServerTransport::Http { oauth, .. }) => match oauth.workload {
                    Some(crate::spec::WorkloadToken::File { path, .. }) => Ok(path),
                    _ => panic!("the token file is gone"),
                },
                Ok(_) => panic!("not HTTP"),
                Err(e) => Err(e.to_string()),
            }
        };
        assert_eq!(path_of("token.jwt").unwrap(), "/graphs/token.jwt");
        assert_eq!(
            path_of("${WORKSPACE}/token.jwt").unwrap(),
            "/tmp/ws/token.jwt"
        );
        assert_eq!(
            path_of("${TOKEN_FILE}").unwrap_err(),
            "cannot start server `api`: `oauth.assertion_file`: the environment variable `TOKEN_FILE` is not set (write `${TOKEN_FILE:-default}` to give a default)"
        );
    }
}
