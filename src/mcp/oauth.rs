//! OAuth 2.1 for HTTP servers that ask for it, per the MCP authorization spec, through
//! rmcp's support: protected-resource and authorization-server metadata discovery,
//! client registration (dynamic, or a client-ID metadata document when offered), an
//! authorization-code grant with PKCE, the token sent with every request and
//! refreshed. Switchyard opens no browser: the authorization step completes when the
//! authorization server sends the browser straight back (a pre-approved client, as the
//! conformance suite's does); one that wants a person to log in is an error that says
//! where. Tokens live in this process's memory only: never in events, checkpoints or
//! messages.

use rmcp::transport::auth::{AuthClient, AuthorizationManager, AuthorizationRequest, OAuthState};

/// Where the authorization server is asked to send the code. Nothing listens there:
/// the redirect is read from the authorization response itself.
const REDIRECT_URI: &str = "http://localhost/switchyard/oauth/callback";

/// An HTTP client that authorizes itself with the server at `url`: the whole flow, or
/// why it could not be done (without any token in the message).
pub(crate) async fn authorized_client(url: &str) -> Result<AuthClient<reqwest::Client>, String> {
    let manager = AuthorizationManager::new_allowing_private_addresses(url)
        .await
        .map_err(|e| format!("OAuth: {e}"))?;
    let mut state = OAuthState::Unauthorized(manager);
    state
        .start_authorization(AuthorizationRequest::new(REDIRECT_URI).with_client_name("switchyard"))
        .await
        .map_err(|e| format!("OAuth discovery and registration failed: {e}"))?;
    let authorize = state
        .get_authorization_url()
        .await
        .map_err(|e| format!("OAuth: {e}"))?;
    // The authorization endpoint, visited as a browser would, but not followed: where
    // it sends the browser carries the code.
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("OAuth: {e}"))?;
    let response = http
        .get(&authorize)
        .send()
        .await
        .map_err(|e| format!("OAuth: the authorization endpoint cannot be reached: {e}"))?;
    let location = response
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|l| l.to_str().ok())
        .filter(|l| l.starts_with(REDIRECT_URI))
        .map(str::to_string)
        .ok_or_else(|| {
            format!(
                "OAuth: the authorization server wants a person to sign in (it answered {} rather than sending back a code); Switchyard opens no browser, so give the server a token with `headers = {{ Authorization = \"Bearer ${{TOKEN}}\" }}` instead",
                response.status()
            )
        })?;
    state
        .handle_callback_url(&location)
        .await
        .map_err(|e| format!("OAuth: the token request failed: {e}"))?;
    match state {
        OAuthState::Authorized(manager) => Ok(AuthClient::new(reqwest::Client::new(), manager)),
        _ => Err("OAuth: the authorization did not complete".to_string()),
    }
}

/// Whether a connection failed because the server wants authorization (a 401).
pub(crate) fn wants_authorization(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(err) = next {
        if err.to_string().contains("Auth required") {
            return true;
        }
        next = err.source();
    }
    false
}
