//! Getting a token for one server: discovery seeded by its challenge, then the grant
//! the graph's settings choose; and a wider one when the server wants more scope.

use super::callback::Callback;
use crate::mcp::event_sink::EventSink;
use crate::run::Event;
use crate::spec::OAuth;
use rmcp::transport::auth::{
    AuthError, AuthorizationCallback, AuthorizationManager, AuthorizationMetadata,
    OAuthClientConfig,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// How long a person has to sign in once the `sign_in` event is out.
const SIGN_IN_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// Wider-scope grants after a 403, over a connection's life: a server that keeps
/// refusing is not asked forever (the spec's advice; the conformance suite allows
/// three authorizations in all).
const MAX_UPGRADES: u32 = 2;

/// What one server's authorization has reached.
pub(super) struct Authorization {
    url: String,
    /// The server's name, for the `sign_in` event.
    server: String,
    events: EventSink,
    /// Set while a person is being waited for: the handshake's time limit waits too.
    signing_in: Arc<AtomicBool>,
    /// Where the browser comes back, bound at the first authorization-code grant.
    callback: Option<Callback>,
    settings: OAuth,
    /// Follows no redirect: the authorization endpoint's answer carries the code.
    http: reqwest::Client,
    metadata: Option<AuthorizationMetadata>,
    /// The authorization-code grant's state: its token, refreshed when it expires.
    manager: Option<AuthorizationManager>,
    /// A token of a grant rmcp does not hold: client credentials, cross-app access, a
    /// workload's JWT, or one got with a DPoP proof (refreshed by `refresh_bound`, the
    /// others granted anew).
    token: Option<String>,
    /// The scopes the last grant asked for.
    scopes: Vec<String>,
    upgrades: u32,
    /// The authorization-code grant made with DPoP proofs, when the authorization
    /// server takes them: for a wider scope and a refresh with a proof, and the key
    /// and nonce of requests' proofs.
    pub(super) dpop: Option<dpop_code::ProofGrant>,
    /// The last flow that failed and when: asked again within `RETRY_AFTER`, the same
    /// answer (requests that waited for it, a stream reconnecting in a loop) rather
    /// than another registration and grant.
    failed: Option<(std::time::Instant, String)>,
}

mod dpop_code;
mod grants;

const RETRY_AFTER: std::time::Duration = std::time::Duration::from_secs(10);

impl Authorization {
    pub(super) fn new(
        url: &str,
        server: &str,
        settings: OAuth,
        http: reqwest::Client,
        events: EventSink,
        signing_in: Arc<AtomicBool>,
    ) -> Self {
        Self {
            url: url.to_string(),
            server: server.to_string(),
            events,
            signing_in,
            callback: None,
            settings,
            http,
            metadata: None,
            manager: None,
            token: None,
            scopes: Vec::new(),
            upgrades: 0,
            dpop: None,
            failed: None,
        }
    }

    /// The token to send, if any yet.
    pub(super) async fn token(&self) -> Result<Option<String>, String> {
        if let Some(token) = &self.token {
            return Ok(Some(token.clone()));
        }
        let Some(manager) = &self.manager else {
            return Ok(None);
        };
        match manager.get_access_token().await {
            Ok(token) => Ok(Some(token)),
            Err(AuthError::AuthorizationRequired) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    /// After a 401 to a request that carried `sent`: a new token, from the whole flow
    /// (unless another request has already got one since).
    pub(super) async fn authorize(
        &mut self,
        sent: Option<&str>,
        challenge: &str,
    ) -> Result<String, String> {
        // A token another request got meanwhile; a token that cannot be read (its
        // refresh failed) is replaced by the flow.
        if let Ok(Some(current)) = self.token().await
            && sent != Some(current.as_str())
        {
            return Ok(current);
        }
        if let Some((when, why)) = &self.failed
            && when.elapsed() < RETRY_AFTER
        {
            return Err(why.clone());
        }
        // A DPoP-bound token that expired is refreshed with a proof (rmcp refreshes
        // its own bearer tokens); the whole flow only when that fails.
        if let Some(token) = self.refresh_bound().await {
            self.token = Some(token.clone());
            return Ok(token);
        }
        let result = self.grant(challenge).await;
        self.failed = match &result {
            Err(why) => Some((std::time::Instant::now(), why.clone())),
            Ok(_) => None,
        };
        result
    }

    /// The whole flow: discovery, then the grant.
    async fn grant(&mut self, challenge: &str) -> Result<String, String> {
        // A token in the clear could be read on the way: none is got for a server over
        // plain HTTP elsewhere than this machine (the MCP spec asks for HTTPS).
        if !grants::token_may_go_to(&self.url) {
            return Err(
                "the server asks for OAuth over plain HTTP (not HTTPS, not this machine): no token is sent to it"
                    .into(),
            );
        }
        self.manager = None;
        self.token = None;
        self.dpop = None;
        let mut manager = AuthorizationManager::new_allowing_private_addresses(self.url.as_str())
            .await
            .map_err(|e| e.to_string())?;
        let metadata = self.discover(&manager, challenge).await?;
        manager.set_metadata(metadata.clone());
        let scopes = if self.settings.scopes.is_empty() {
            let mut scopes = manager.select_scopes(None, &[]);
            if self.settings.client_credentials
                || self.settings.identity.is_some()
                || self.settings.workload.is_some()
            {
                // Refresh tokens are for a person's grant in the browser.
                scopes.retain(|s| s != "offline_access");
            }
            // A grant again (the token expired or was revoked) keeps the wider
            // scope steps up had added.
            for s in &self.scopes {
                if !scopes.contains(s) {
                    scopes.push(s.clone());
                }
            }
            scopes
        } else {
            self.settings.scopes.clone()
        };
        let token = if let Some(identity) = &self.settings.identity {
            let token = self
                .identity_assertion(identity, &metadata, &scopes)
                .await?;
            self.token = Some(token.clone());
            token
        } else if let Some(workload) = &self.settings.workload {
            let token = self.workload(workload, &metadata, &scopes).await?;
            self.token = Some(token.clone());
            token
        } else if self.settings.client_credentials {
            let token = self.client_credentials(&metadata, &scopes).await?;
            self.token = Some(token.clone());
            token
        } else {
            if self.callback.is_none() {
                self.callback = Some(Callback::bind().await?);
            }
            let client = self.client(&mut manager, &metadata, &scopes).await?;
            if super::dpop::offered(&metadata) {
                // The code is exchanged here, with a proof: rmcp's exchange sends none.
                let states = rmcp::transport::auth::InMemoryStateStore::new();
                manager.set_state_store(states.clone());
                manager
                    .configure_client(client.clone())
                    .map_err(|e| e.to_string())?;
                let mut grant = dpop_code::ProofGrant {
                    manager,
                    states,
                    client,
                    key: super::dpop::DpopKey::generate()?,
                    bound: false,
                    refresh: None,
                    server_nonce: None,
                };
                let token = self.code_with_proof(&mut grant, &metadata, &scopes).await?;
                // Kept bound or not: a wider scope and a refresh go through it.
                self.dpop = Some(grant);
                self.token = Some(token.clone());
                token
            } else {
                manager
                    .configure_client(client)
                    .map_err(|e| e.to_string())?;
                let token = self.code(&manager, &scopes).await?;
                self.manager = Some(manager);
                token
            }
        };
        self.metadata = Some(metadata);
        self.scopes = scopes;
        Ok(token)
    }

    /// After a 403 `insufficient_scope` naming `required`: a token for the wider
    /// scope, or none when asking again cannot help (the scope was asked for already,
    /// or the upgrades are spent).
    pub(super) async fn upgrade(
        &mut self,
        sent: Option<&str>,
        required: Option<&str>,
    ) -> Result<Option<String>, String> {
        if let Some(current) = self.token().await?
            && sent != Some(current.as_str())
        {
            return Ok(Some(current));
        }
        let Some(metadata) = self.metadata.clone() else {
            return Ok(None);
        };
        let mut wider = self.scopes.clone();
        for scope in required.unwrap_or_default().split_whitespace() {
            if !wider.iter().any(|s| s == scope) {
                wider.push(scope.to_string());
            }
        }
        if wider.len() == self.scopes.len() || self.upgrades >= MAX_UPGRADES {
            return Ok(None);
        }
        self.upgrades += 1;
        let token = if let Some(identity) = self.settings.identity.clone() {
            let token = self
                .identity_assertion(&identity, &metadata, &wider)
                .await?;
            self.token = Some(token.clone());
            token
        } else if let Some(workload) = self.settings.workload.clone() {
            let token = self.workload(&workload, &metadata, &wider).await?;
            self.token = Some(token.clone());
            token
        } else if self.settings.client_credentials {
            let token = self.client_credentials(&metadata, &wider).await?;
            self.token = Some(token.clone());
            token
        } else if let Some(mut grant) = self.dpop.take() {
            let result = self.code_with_proof(&mut grant, &metadata, &wider).await;
            self.dpop = Some(grant);
            let token = result?;
            self.token = Some(token.clone());
            token
        } else {
            let Some(manager) = &self.manager else {
                return Ok(None);
            };
            self.code(manager, &wider).await?
        };
        self.scopes = wider;
        Ok(Some(token))
    }

    /// Authorization-server metadata, found from the challenge's resource-metadata URL
    /// or the well-known locations.
    ///
    /// One exception to the issuer check: a 2025-03-26 server (no resource metadata)
    /// whose metadata, at the root of its own origin, names as issuer a path of that
    /// origin (`http://host/oauth`), with every endpoint on that origin. That layout
    /// predates the check; nothing outside the server's origin is trusted for it.
    async fn discover(
        &self,
        manager: &AuthorizationManager,
        challenge: &str,
    ) -> Result<AuthorizationMetadata, String> {
        let mismatch = match manager
            .resolve_metadata_from_challenge(Some(challenge))
            .await
        {
            Ok(resolution) => return Ok(resolution.metadata),
            Err(e @ AuthError::AuthorizationServerMismatch { .. }) => e,
            Err(e) => return Err(format!("discovery failed: {e}")),
        };
        let refused = || format!("discovery failed: {mismatch}");
        let AuthError::AuthorizationServerMismatch {
            expected_issuer,
            received_issuer,
        } = &mismatch
        else {
            return Err(refused());
        };
        let server = reqwest::Url::parse(&self.url).map_err(|_| refused())?;
        let origin = server.origin();
        let same_origin = |u: &str| reqwest::Url::parse(u).is_ok_and(|u| u.origin() == origin);
        let at_root = reqwest::Url::parse(expected_issuer)
            .is_ok_and(|u| u.origin() == origin && matches!(u.path(), "" | "/"));
        let issuer_below = reqwest::Url::parse(received_issuer)
            .is_ok_and(|u| u.origin() == origin && !matches!(u.path(), "" | "/"));
        if !at_root || !issuer_below {
            return Err(refused());
        }
        let at = server
            .join("/.well-known/oauth-authorization-server")
            .map_err(|_| refused())?;
        let response = self.http.get(at).send().await.map_err(|_| refused())?;
        if !response.status().is_success() {
            return Err(refused());
        }
        let metadata: AuthorizationMetadata = response.json().await.map_err(|_| refused())?;
        let endpoints_here = same_origin(&metadata.authorization_endpoint)
            && same_origin(&metadata.token_endpoint)
            && metadata
                .registration_endpoint
                .as_deref()
                .is_none_or(same_origin);
        if metadata.issuer.as_deref() != Some(received_issuer.as_str()) || !endpoints_here {
            return Err(refused());
        }
        Ok(metadata)
    }

    /// Who this client is to the authorization server: registered beforehand, named
    /// by its metadata document where the server takes one, or registered now.
    async fn client(
        &self,
        manager: &mut AuthorizationManager,
        metadata: &AuthorizationMetadata,
        scopes: &[String],
    ) -> Result<OAuthClientConfig, String> {
        let redirect = self.redirect()?;
        if let Some(id) = &self.settings.client_id {
            let mut config = OAuthClientConfig::new(id, redirect).with_scopes(scopes.to_vec());
            if let Some(secret) = &self.settings.client_secret {
                config = config.with_client_secret(secret);
            }
            return Ok(config);
        }
        let takes_document = metadata
            .additional_fields
            .get("client_id_metadata_document_supported")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        if let (Some(url), true) = (&self.settings.client_metadata_url, takes_document) {
            return Ok(OAuthClientConfig::new(url, redirect)
                .with_scopes(scopes.to_vec())
                .with_application_type("native"));
        }
        let refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
        manager
            .register_client("switchyard", redirect, &refs)
            .await
            .map_err(|e| format!("dynamic client registration failed: {e}"))
    }

    /// The authorization-code grant for `scopes`: the authorization endpoint visited as
    /// a browser would, its redirect read rather than followed, the code exchanged.
    async fn code(
        &self,
        manager: &AuthorizationManager,
        scopes: &[String],
    ) -> Result<String, String> {
        let callback = self.sign_in(manager, scopes).await?;
        manager
            .exchange_code_for_token_with_issuer(
                &callback.code,
                &callback.csrf_token,
                callback.issuer.as_deref(),
            )
            .await
            .map_err(|e| format!("the token request failed: {e}"))?;
        manager.get_access_token().await.map_err(|e| e.to_string())
    }

    /// The authorization endpoint visited as a browser would (its redirect read rather
    /// than followed, or a person sent there), and the code it sends back.
    async fn sign_in(
        &self,
        manager: &AuthorizationManager,
        scopes: &[String],
    ) -> Result<AuthorizationCallback, String> {
        let refs: Vec<&str> = scopes.iter().map(String::as_str).collect();
        let authorize = manager
            .get_authorization_url(&refs)
            .await
            .map_err(|e| e.to_string())?;
        let response = self.http.get(&authorize).send().await.map_err(|e| {
            format!(
                "the authorization endpoint cannot be reached: {}",
                e.without_url()
            )
        })?;
        let redirect = self.redirect()?;
        let straight_back = response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .filter(|l| l.starts_with(redirect))
            .map(str::to_string);
        let location = match straight_back {
            Some(location) => location,
            None => self.wait_for_person(&authorize).await?,
        };
        let back = reqwest::Url::parse(&location).map_err(|e| e.to_string())?;
        if let Some((_, error)) = back.query_pairs().find(|(k, _)| k == "error") {
            let said = back
                .query_pairs()
                .find(|(k, _)| k == "error_description")
                .map(|(_, d)| format!(": {d}"))
                .unwrap_or_default();
            return Err(format!("the sign-in was refused ({error}{said})"));
        }
        AuthorizationCallback::from_redirect_url(&location).map_err(|e| e.to_string())
    }

    fn redirect(&self) -> Result<&str, String> {
        self.callback
            .as_ref()
            .map(Callback::redirect)
            .ok_or_else(|| "no redirect listener for the sign-in".to_string())
    }

    /// The authorization server wants a person: the URL goes out as a `sign_in` event
    /// and the browser's return is waited for, `SIGN_IN_WAIT` at most.
    async fn wait_for_person(&self, authorize: &str) -> Result<String, String> {
        let Some(callback) = &self.callback else {
            return Err("no redirect listener for the sign-in".to_string());
        };
        self.events.emit(Event::SignIn {
            server: self.server.clone(),
            url: authorize.to_string(),
        });
        self.signing_in.store(true, Ordering::SeqCst);
        let state = reqwest::Url::parse(authorize)
            .ok()
            .and_then(|u| {
                u.query_pairs()
                    .find(|(k, _)| k == "state")
                    .map(|(_, v)| v.into_owned())
            })
            .unwrap_or_default();
        let back = tokio::time::timeout(SIGN_IN_WAIT, callback.wait(&self.server, &state)).await;
        self.signing_in.store(false, Ordering::SeqCst);
        back.unwrap_or_else(|_| {
            Err(format!(
                "nobody signed in within {} minutes (the authorization server wants a person to sign in at the URL of the `sign_in` event); for a run without a person, give the server a token with `headers = {{ Authorization = \"Bearer ${{TOKEN}}\" }}` or use `grant = \"client_credentials\"`",
                SIGN_IN_WAIT.as_secs() / 60
            ))
        })
    }
}
