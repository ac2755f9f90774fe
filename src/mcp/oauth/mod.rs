//! OAuth 2.1 for HTTP servers that ask for it, per the MCP authorization spec.
//!
//! Authorization is reactive: requests go out without a token until the server
//! answers 401; its challenge (`WWW-Authenticate`, with the resource-metadata URL and
//! the scope it wants) then drives discovery and the grant, in the middle of the
//! request, which is sent again with the token. A 403 `insufficient_scope` later asks
//! for the wider scope the same way, a bounded number of times. Four grants:
//!
//! - the authorization code with PKCE (rmcp's support: metadata discovery, client
//!   registration by a pre-registered ID, a client-ID metadata document or dynamic
//!   registration, the token exchange and its refresh). The browser is sent back to a
//!   loopback port of this machine. An authorization server that sends it straight
//!   back (a pre-approved client) needs nobody; one that wants a person to sign in gets
//!   a `sign_in` event with the URL to open, and the flow waits for them (the
//!   handshake's time limit waits too).
//! - client credentials (a machine's own grant), with a client secret (HTTP Basic, or
//!   in the body where only that is offered) or a signed assertion (`private_key_jwt`).
//! - cross-app access (SEP-990): a person's ID token exchanged at their identity
//!   provider for an identity assertion, which the authorization server takes from
//!   this client as a JWT bearer grant.
//! - workload identity federation (SEP-1933): a JWT the platform issued this
//!   workload, as a JWT bearer grant.
//!
//! Where the authorization server offers DPoP (RFC 9449), the authorization-code
//! grant's token is bound to a key of this client's (`dpop`), and every request carries
//! a proof of it.
//!
//! Tokens and secrets live in this process's memory only: never in events,
//! checkpoints or messages.

mod assertion;
mod callback;
mod dpop;
mod flow;
mod transport;

pub(crate) use transport::Authorizing;
