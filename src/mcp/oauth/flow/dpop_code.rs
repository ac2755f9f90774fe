//! The authorization code exchanged for a DPoP-bound token (RFC 9449 §5), and the
//! token refreshed: rmcp makes the authorization URL, its PKCE pair and its state,
//! and Switchyard makes the token requests itself, with a proof, since rmcp's cannot
//! carry one. An authorization server that wants a nonce in the proof
//! (`use_dpop_nonce`, §8) is asked again with the one it sent.

use super::Authorization;
use super::grants::Client;
use crate::mcp::oauth::dpop::DpopKey;
use rmcp::transport::auth::{
    AuthorizationManager, AuthorizationMetadata, InMemoryStateStore, OAuthClientConfig, StateStore,
};

/// An authorization-code grant made with DPoP proofs: what its next token request
/// needs, and what requests to the server carry.
pub(in crate::mcp::oauth) struct ProofGrant {
    /// rmcp's authorization URLs, and the PKCE states it keeps for them.
    pub(super) manager: AuthorizationManager,
    pub(super) states: InMemoryStateStore,
    pub(super) client: OAuthClientConfig,
    /// The key of the proofs.
    pub(in crate::mcp::oauth) key: DpopKey,
    /// The token is bound to `key` (`token_type` DPoP): requests to the server carry
    /// `Authorization: DPoP` and a proof. An authorization server that ignored the
    /// proof gave a bearer token, sent as one.
    pub(in crate::mcp::oauth) bound: bool,
    /// The refresh token of the last answer, when it gave one.
    pub(super) refresh: Option<String>,
    /// The nonce the server (the resource server) last asked proofs to carry.
    pub(in crate::mcp::oauth) server_nonce: Option<String>,
}

impl Authorization {
    /// The token of an authorization code got with a proof; `grant` learns whether
    /// it is bound, and its refresh token.
    pub(super) async fn code_with_proof(
        &self,
        grant: &mut ProofGrant,
        metadata: &AuthorizationMetadata,
        scopes: &[String],
    ) -> Result<String, String> {
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
        let (token, bound, refresh) = self.token_with_proof(metadata, grant, pairs).await?;
        grant.bound = bound;
        grant.refresh = refresh;
        Ok(token)
    }

    /// A token got with a proof refreshed with one, when the grant gave a refresh token;
    /// none when it did not or the refresh was refused (the flow then starts anew).
    pub(super) async fn refresh_bound(&mut self) -> Option<String> {
        let (Some(grant), Some(metadata)) = (&self.dpop, &self.metadata) else {
            return None;
        };
        let refresh = grant.refresh.clone()?;
        let pairs = vec![
            ("grant_type", "refresh_token".to_string()),
            ("refresh_token", refresh),
        ];
        let (token, bound, refresh) = self.token_with_proof(metadata, grant, pairs).await.ok()?;
        if let Some(grant) = &mut self.dpop {
            grant.bound = bound;
            if refresh.is_some() {
                grant.refresh = refresh;
            }
        }
        Some(token)
    }

    /// A token request with these form fields and a proof: the token, whether it is
    /// DPoP-bound, and its refresh token.
    async fn token_with_proof(
        &self,
        metadata: &AuthorizationMetadata,
        grant: &ProofGrant,
        mut pairs: Vec<(&'static str, String)>,
    ) -> Result<(String, bool, Option<String>), String> {
        pairs.push(("resource", self.resource()?));
        let body = self
            .token_request(
                metadata,
                &metadata.token_endpoint,
                pairs,
                Client::Registered(&grant.client),
                Some(&grant.key),
            )
            .await
            .map_err(|e| e.replace("{grant}", "the token request"))?;
        let said = |k: &str| body.get(k).and_then(|v| v.as_str()).unwrap_or_default();
        let token = said("access_token");
        if token.is_empty() {
            return Err("the token endpoint's answer has no access_token".into());
        }
        let refresh = Some(said("refresh_token"))
            .filter(|r| !r.is_empty())
            .map(str::to_string);
        Ok((
            token.to_string(),
            said("token_type").eq_ignore_ascii_case("dpop"),
            refresh,
        ))
    }
}
