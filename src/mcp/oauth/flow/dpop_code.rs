//! The authorization code exchanged for a DPoP-bound token (RFC 9449 §5), and the
//! token refreshed: rmcp makes the authorization URL, its PKCE pair and its state,
//! and Switchyard makes the token requests itself, with a proof, since rmcp's cannot
//! carry one. An authorization server that wants a nonce in the proof
//! (`use_dpop_nonce`, §8) is asked again with the one it sent.

use super::Authorization;
use crate::mcp::oauth::dpop::DpopKey;
use rmcp::transport::auth::{
    AuthorizationManager, AuthorizationMetadata, InMemoryStateStore, OAuthClientConfig, StateStore,
};

/// Token requests a nonce challenge may cost: the first, and the one with its nonce.
const NONCE_TRIES: usize = 2;

/// What a DPoP-bound authorization-code grant keeps for its next token request.
pub(in crate::mcp::oauth) struct BoundGrant {
    pub(super) manager: AuthorizationManager,
    pub(super) states: InMemoryStateStore,
    pub(super) client: OAuthClientConfig,
    /// The refresh token of the last answer, when it gave one.
    pub(super) refresh: Option<String>,
}

impl Authorization {
    /// The token, and whether it is bound to `key` (`token_type` DPoP; an
    /// authorization server that ignored the proof gives a bearer token).
    pub(super) async fn code_with_proof(
        &self,
        grant: &mut BoundGrant,
        metadata: &AuthorizationMetadata,
        key: &DpopKey,
        scopes: &[String],
    ) -> Result<(String, bool), String> {
        let callback = self.sign_in(&grant.manager, scopes).await?;
        let state = grant
            .states
            .load(&callback.csrf_token)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("the sign-in came back with a state this client did not send")?;
        grant
            .states
            .delete(&callback.csrf_token)
            .await
            .map_err(|e| e.to_string())?;
        // The issuer the redirect names (RFC 9207), as rmcp's own exchange checks it.
        match (&state.expected_issuer, &callback.issuer) {
            (Some(expected), Some(got)) if expected != got => {
                return Err(format!(
                    "the sign-in came back from issuer `{got}`, not `{expected}`"
                ));
            }
            (Some(expected), None) if state.require_issuer => {
                return Err(format!(
                    "the sign-in came back without the issuer `{expected}` said it would name"
                ));
            }
            _ => {}
        }
        let pairs = vec![
            ("grant_type", "authorization_code".to_string()),
            ("code", callback.code.clone()),
            ("redirect_uri", grant.client.redirect_uri.clone()),
            ("code_verifier", state.pkce_verifier.clone()),
        ];
        let (token, bound, refresh) = self
            .token_with_proof(metadata, &grant.client, key, pairs)
            .await?;
        grant.refresh = refresh;
        Ok((token, bound))
    }

    /// A DPoP-bound token refreshed with a proof, when the grant gave a refresh token;
    /// none when it did not or the refresh was refused (the flow then starts anew).
    pub(super) async fn refresh_bound(&mut self) -> Option<String> {
        let (Some(grant), Some(key), Some(metadata)) = (&self.bound, &self.dpop, &self.metadata)
        else {
            return None;
        };
        let refresh = grant.refresh.clone()?;
        let pairs = vec![
            ("grant_type", "refresh_token".to_string()),
            ("refresh_token", refresh),
        ];
        let (token, _, refresh) = self
            .token_with_proof(metadata, &grant.client, key, pairs)
            .await
            .ok()?;
        if let Some(grant) = &mut self.bound
            && refresh.is_some()
        {
            grant.refresh = refresh;
        }
        Some(token)
    }

    /// A token request with these form fields and a proof: the token, whether it is
    /// DPoP-bound, and its refresh token.
    async fn token_with_proof(
        &self,
        metadata: &AuthorizationMetadata,
        client: &OAuthClientConfig,
        key: &DpopKey,
        mut pairs: Vec<(&'static str, String)>,
    ) -> Result<(String, bool, Option<String>), String> {
        let mut resource = reqwest::Url::parse(&self.url).map_err(|e| e.to_string())?;
        resource.set_query(None);
        resource.set_fragment(None);
        pairs.push(("resource", resource.to_string()));
        let endpoint = metadata.token_endpoint.clone();
        self.sendable(&endpoint)?;
        let offered = |m: &str| {
            metadata
                .additional_fields
                .get("token_endpoint_auth_methods_supported")
                .and_then(|v| v.as_array())
                .is_some_and(|a| a.iter().any(|x| x.as_str() == Some(m)))
        };
        // As the client registered: its secret in HTTP Basic (or the body, where only
        // that is offered), or its ID alone for a public client.
        let basic = match &client.client_secret {
            Some(secret) if !offered("client_secret_post") || offered("client_secret_basic") => {
                Some(secret.clone())
            }
            Some(secret) => {
                pairs.push(("client_id", client.client_id.clone()));
                pairs.push(("client_secret", secret.clone()));
                None
            }
            None => {
                pairs.push(("client_id", client.client_id.clone()));
                None
            }
        };
        let mut nonce: Option<String> = None;
        for _ in 0..NONCE_TRIES {
            let proof = key.proof("POST", &endpoint, None, nonce.as_deref())?;
            let body = {
                let mut form = form_urlencoded::Serializer::new(String::new());
                for (k, v) in &pairs {
                    form.append_pair(k, v);
                }
                form.finish()
            };
            let mut request = self
                .http
                .post(&endpoint)
                .header(
                    reqwest::header::CONTENT_TYPE,
                    "application/x-www-form-urlencoded",
                )
                .header("DPoP", proof)
                .body(body);
            if let Some(secret) = &basic {
                let encode =
                    |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
                request = request.basic_auth(encode(&client.client_id), Some(encode(secret)));
            }
            let response = request.send().await.map_err(|e| {
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
            let said = |k: &str| body.get(k).and_then(|v| v.as_str()).unwrap_or_default();
            if status.is_success() {
                let token = said("access_token");
                if token.is_empty() {
                    return Err("the token endpoint's answer has no access_token".into());
                }
                let refresh = Some(said("refresh_token"))
                    .filter(|r| !r.is_empty())
                    .map(str::to_string);
                return Ok((
                    token.to_string(),
                    said("token_type").eq_ignore_ascii_case("dpop"),
                    refresh,
                ));
            }
            match asked_nonce {
                Some(n) if said("error") == "use_dpop_nonce" && nonce.is_none() => {
                    nonce = Some(n);
                }
                _ => {
                    return Err(format!(
                        "the token request was refused ({status}): {} {}",
                        said("error"),
                        said("error_description")
                    )
                    .trim_end()
                    .to_string());
                }
            }
        }
        Err("the token endpoint kept asking for a new DPoP nonce".into())
    }
}
