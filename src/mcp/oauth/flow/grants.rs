//! The grants that need no person: client credentials (RFC 6749 4.4), cross-app
//! access (SEP-990: an identity assertion from the person's identity provider, taken
//! as a JWT bearer grant), a workload's own JWT as a JWT bearer grant (SEP-1933), and
//! the token request they make.

use super::Authorization;
use crate::mcp::oauth::assertion;
use crate::mcp::oauth::dpop::DpopKey;
use crate::spec::WorkloadToken;
use rmcp::transport::auth::AuthorizationMetadata;
use rmcp::transport::auth::OAuthClientConfig;

impl Authorization {
    /// The client-credentials grant (RFC 6749 4.4) for `scopes`, the client
    /// authenticated by a signed assertion or its secret (HTTP Basic unless the server
    /// offers only the secret in the body).
    pub(super) async fn client_credentials(
        &self,
        metadata: &AuthorizationMetadata,
        scopes: &[String],
    ) -> Result<String, String> {
        let resource = self.resource()?;
        let mut pairs = vec![
            ("grant_type", "client_credentials".to_string()),
            ("resource", resource),
        ];
        if !scopes.is_empty() {
            pairs.push(("scope", scopes.join(" ")));
        }
        let body = self
            .token_request(
                metadata,
                &metadata.token_endpoint,
                pairs,
                Client::Configured,
                None,
            )
            .await
            .map_err(|e| e.replace("{grant}", "the client-credentials grant"))?;
        bearer(&body)
    }

    /// Cross-app access (SEP-990): the person's ID token exchanged at their identity
    /// provider for an identity assertion grant (ID-JAG, RFC 8693 token exchange)
    /// addressed to the authorization server, which takes it as a JWT bearer grant
    /// (RFC 7523) from this client, authenticated with its secret.
    pub(super) async fn identity_assertion(
        &self,
        identity: &crate::spec::IdentityAssertion,
        metadata: &AuthorizationMetadata,
        scopes: &[String],
    ) -> Result<String, String> {
        let resource = self.resource()?;
        let audience = metadata
            .issuer
            .clone()
            .ok_or("the authorization server's metadata names no issuer, which an identity assertion is addressed to")?;
        let mut pairs = vec![
            (
                "grant_type",
                "urn:ietf:params:oauth:grant-type:token-exchange".to_string(),
            ),
            (
                "requested_token_type",
                "urn:ietf:params:oauth:token-type:id-jag".to_string(),
            ),
            ("audience", audience),
            ("resource", resource),
            ("subject_token", identity.id_token.clone()),
            (
                "subject_token_type",
                "urn:ietf:params:oauth:token-type:id_token".to_string(),
            ),
        ];
        if let Some(id) = &identity.client_id {
            pairs.push(("client_id", id.clone()));
        }
        if !scopes.is_empty() {
            pairs.push(("scope", scopes.join(" ")));
        }
        let exchanged = self
            .token_request(
                metadata,
                &identity.token_endpoint,
                pairs,
                Client::Anonymous,
                None,
            )
            .await
            .map_err(|e| e.replace("{grant}", "the identity provider's token exchange"))?;
        let assertion = exchanged
            .get("access_token")
            .and_then(|t| t.as_str())
            .ok_or("the identity provider's token exchange gave no access_token")?
            .to_string();
        let mut pairs = vec![
            (
                "grant_type",
                "urn:ietf:params:oauth:grant-type:jwt-bearer".to_string(),
            ),
            ("assertion", assertion),
        ];
        if !scopes.is_empty() {
            pairs.push(("scope", scopes.join(" ")));
        }
        let body = self
            .token_request(
                metadata,
                &metadata.token_endpoint,
                pairs,
                Client::Configured,
                None,
            )
            .await
            .map_err(|e| e.replace("{grant}", "the JWT bearer grant of the identity assertion"))?;
        bearer(&body)
    }

    /// Workload identity federation (SEP-1933): the JWT the platform issued this
    /// workload, taken by the authorization server as a JWT bearer grant (RFC 7523).
    /// The client authenticates as configured, or names itself (`client_id`) when it
    /// has no secret. A refusal is the flow's answer: no other grant is tried.
    pub(super) async fn workload(
        &self,
        token: &WorkloadToken,
        metadata: &AuthorizationMetadata,
        scopes: &[String],
    ) -> Result<String, String> {
        let assertion = match token {
            WorkloadToken::Value(v) => {
                if v.trim().is_empty() {
                    return Err("the workload's token (`assertion`) is empty".into());
                }
                v.trim().to_string()
            }
            // Read at each grant: the platform replaces the file as tokens expire.
            WorkloadToken::File { path, .. } => {
                let text = tokio::fs::read_to_string(path)
                    .await
                    .map_err(|e| format!("cannot read the workload's token from `{path}`: {e}"))?;
                if text.trim().is_empty() {
                    return Err(format!("the workload's token file `{path}` is empty"));
                }
                text.trim().to_string()
            }
        };
        let mut pairs = vec![
            (
                "grant_type",
                "urn:ietf:params:oauth:grant-type:jwt-bearer".to_string(),
            ),
            ("assertion", assertion),
            ("resource", self.resource()?),
        ];
        if !scopes.is_empty() {
            pairs.push(("scope", scopes.join(" ")));
        }
        let body = self
            .token_request(
                metadata,
                &metadata.token_endpoint,
                pairs,
                Client::Configured,
                None,
            )
            .await
            .map_err(|e| e.replace("{grant}", "the JWT bearer grant of the workload's token"))?;
        bearer(&body)
    }

    /// Whether credentials may go to the token endpoint `endpoint`: over HTTPS only,
    /// or between two loopback addresses (a server on this machine), as rmcp's own
    /// grant requires.
    pub(super) fn sendable(&self, endpoint: &str) -> Result<(), String> {
        let url = reqwest::Url::parse(endpoint)
            .map_err(|_| format!("the token endpoint `{endpoint}` is not a URL"))?;
        let server = reqwest::Url::parse(&self.url).map_err(|e| e.to_string())?;
        if url.scheme() != "https"
            && !(url.scheme() == "http" && loopback(&url) && loopback(&server))
        {
            return Err(format!(
                "the token endpoint `{endpoint}` is not HTTPS; the client's credentials are not sent there"
            ));
        }
        Ok(())
    }

    /// The resource indicator (RFC 8707): the server's URL without its query.
    pub(super) fn resource(&self) -> Result<String, String> {
        let mut resource = reqwest::Url::parse(&self.url).map_err(|e| e.to_string())?;
        resource.set_query(None);
        resource.set_fragment(None);
        Ok(resource.to_string())
    }

    /// A token request to `endpoint` with these form fields, this client
    /// authenticated as `client` says (by a signed assertion, its secret, or its ID
    /// alone), and with a DPoP proof of `proof` when given (RFC 9449 §5; a
    /// `use_dpop_nonce` answer is met once with the nonce it sent, §8); the answer's
    /// JSON. An error's `{grant}` is for the caller to name.
    pub(super) async fn token_request(
        &self,
        metadata: &AuthorizationMetadata,
        endpoint: &str,
        pairs: Vec<(&str, String)>,
        client: Client<'_>,
        proof: Option<&DpopKey>,
    ) -> Result<serde_json::Value, String> {
        self.sendable(endpoint)?;
        let (id, secret, key) = match client {
            Client::Anonymous => (None, None, None),
            Client::Configured => (
                Some(self.settings.client_id.as_deref().unwrap_or_default()),
                self.settings.client_secret.as_deref(),
                self.settings.private_key.as_deref(),
            ),
            Client::Registered(c) => (Some(c.client_id.as_str()), c.client_secret.as_deref(), None),
        };
        let mut nonce: Option<String> = None;
        loop {
            // Built whole before anything is awaited: the serializer is not `Send`.
            let (body, mut request) = {
                let mut form = form_urlencoded::Serializer::new(String::new());
                for (k, v) in &pairs {
                    form.append_pair(k, v);
                }
                let mut request = self.http.post(endpoint);
                match (id, key, secret) {
                    (None, ..) => {}
                    (Some(id), Some(key), _) => {
                        // The audience is the authorization server's issuer (RFC 7523
                        // 3, as RFC 8414 names it), not its token endpoint.
                        let audience = metadata
                            .issuer
                            .clone()
                            .ok_or("the authorization server's metadata names no issuer, which a client assertion is addressed to")?;
                        let algorithm = self
                            .settings
                            .signing_algorithm
                            .as_deref()
                            .unwrap_or("ES256");
                        let jwt = assertion::sign(key, algorithm, id, &audience)?;
                        form.append_pair("client_id", id);
                        form.append_pair(
                            "client_assertion_type",
                            "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                        );
                        form.append_pair("client_assertion", &jwt);
                    }
                    (Some(id), None, Some(secret)) => {
                        let offered = |m: &str| {
                            metadata
                                .additional_fields
                                .get("token_endpoint_auth_methods_supported")
                                .and_then(|v| v.as_array())
                                .is_some_and(|a| a.iter().any(|x| x.as_str() == Some(m)))
                        };
                        if offered("client_secret_post") && !offered("client_secret_basic") {
                            form.append_pair("client_id", id);
                            form.append_pair("client_secret", secret);
                        } else {
                            // RFC 6749 2.3.1: both form-encoded before they are joined.
                            let encode = |s: &str| {
                                form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>()
                            };
                            request = request.basic_auth(encode(id), Some(encode(secret)));
                        }
                    }
                    // A public client (`none`): it names itself.
                    (Some(id), None, None) if !id.is_empty() => {
                        form.append_pair("client_id", id);
                    }
                    (Some(_), None, None) => {}
                }
                (form.finish(), request)
            };
            if let Some(key) = proof {
                request =
                    request.header("DPoP", key.proof("POST", endpoint, None, nonce.as_deref())?);
            }
            let response = request
                .header(
                    reqwest::header::CONTENT_TYPE,
                    "application/x-www-form-urlencoded",
                )
                .body(body)
                .send()
                .await
                .map_err(|e| {
                    format!("the token endpoint cannot be reached: {}", e.without_url())
                })?;
            let status = response.status();
            let asked_nonce = response
                .headers()
                .get("DPoP-Nonce")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let body: serde_json::Value = response
                .json()
                .await
                .map_err(|_| format!("the token endpoint answered {status} without JSON"))?;
            if status.is_success() {
                return Ok(body);
            }
            let said = |k: &str| body.get(k).and_then(|v| v.as_str()).unwrap_or_default();
            match asked_nonce {
                Some(n)
                    if proof.is_some() && said("error") == "use_dpop_nonce" && nonce.is_none() =>
                {
                    nonce = Some(n);
                }
                _ => {
                    return Err(format!(
                        "{{grant}} was refused ({status}): {} {}",
                        said("error"),
                        said("error_description")
                    )
                    .trim_end()
                    .to_string());
                }
            }
        }
    }
}

/// Who a token request is from.
pub(super) enum Client<'a> {
    /// Nobody in particular (an identity provider's token exchange).
    Anonymous,
    /// The client the graph's settings name (`client_id`, `client_secret` or
    /// `private_key`).
    Configured,
    /// A client registered for this authorization (dynamic registration, a
    /// client-ID metadata document, or the settings' ID), as rmcp's flow holds it.
    Registered(&'a OAuthClientConfig),
}

/// The bearer token of a token endpoint's answer.
fn bearer(body: &serde_json::Value) -> Result<String, String> {
    let kind = body
        .get("token_type")
        .and_then(|t| t.as_str())
        .unwrap_or("");
    if !kind.eq_ignore_ascii_case("bearer") {
        return Err(format!(
            "the token endpoint gave a `{kind}` token, not a bearer token"
        ));
    }
    body.get("access_token")
        .and_then(|t| t.as_str())
        .map(str::to_string)
        .ok_or_else(|| "the token endpoint's answer has no access_token".to_string())
}

/// A URL of this machine (`localhost`, a loopback address).
pub(super) fn loopback(u: &reqwest::Url) -> bool {
    u.host_str().is_some_and(|h| {
        h == "localhost"
            || h.trim_matches(['[', ']'])
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    })
}

/// Whether a token may go to the server at `url`: over HTTPS, or to this machine.
pub(super) fn token_may_go_to(url: &str) -> bool {
    reqwest::Url::parse(url).is_ok_and(|u| u.scheme() == "https" || loopback(&u))
}

#[cfg(test)]
mod tests {
    #[test]
    fn tokens_go_over_https_or_to_this_machine_only() {
        for (url, ok) in [
            ("https://mcp.example.com/mcp", true),
            ("http://127.0.0.1:3000/mcp", true),
            ("http://localhost/mcp", true),
            ("http://[::1]:8080/mcp", true),
            ("http://mcp.example.com/mcp", false),
            ("http://10.0.0.7/mcp", false),
            ("not a url", false),
        ] {
            assert_eq!(super::token_may_go_to(url), ok, "{url}");
        }
    }
}
