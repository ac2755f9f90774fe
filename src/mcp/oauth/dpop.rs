//! DPoP (RFC 9449; for MCP, the extension SEP-1932): a token bound to a key of this
//! client's, so that a token that leaks is of no use without the key. The key is an
//! ES256 (P-256) pair made for one server's authorization and kept in memory only;
//! every token request and every request to the server carries a proof, a JWT signed
//! with it naming the request's method and URL (and, with a token, the token's hash),
//! fresh each time. Signed with ring, as the client assertion is.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use std::time::{SystemTime, UNIX_EPOCH};

/// The algorithm Switchyard signs proofs with; an authorization server that lists
/// DPoP algorithms without it gets bearer-token requests.
pub(super) const ALGORITHM: &str = "ES256";

pub(super) struct DpopKey {
    pair: EcdsaKeyPair,
    /// The public key as a JWK, which each proof's header carries.
    jwk: serde_json::Value,
    rng: SystemRandom,
}

impl DpopKey {
    pub(super) fn generate() -> Result<Self, String> {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| "cannot make a DPoP key".to_string())?;
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .map_err(|_| "cannot read the DPoP key just made".to_string())?;
        // An uncompressed point: 0x04, then x and y, 32 bytes each.
        let public = pair.public_key().as_ref();
        if public.len() != 65 {
            return Err("the DPoP key's public point is not 65 bytes".into());
        }
        let jwk = serde_json::json!({
            "kty": "EC",
            "crv": "P-256",
            "x": URL_SAFE_NO_PAD.encode(&public[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&public[33..65]),
        });
        Ok(DpopKey { pair, jwk, rng })
    }

    /// A proof for one request: its `method` and `url` (without query or fragment),
    /// the hash of the access token it carries (`ath`), and the nonce the server last
    /// asked for. Each has its own `jti`: a proof is never sent twice.
    pub(super) fn proof(
        &self,
        method: &str,
        url: &str,
        token: Option<&str>,
        nonce: Option<&str>,
    ) -> Result<String, String> {
        let mut htu = reqwest::Url::parse(url)
            .map_err(|_| format!("`{url}` is not a URL a DPoP proof can name"))?;
        htu.set_query(None);
        htu.set_fragment(None);
        let mut jti = [0u8; 16];
        self.rng
            .fill(&mut jti)
            .map_err(|_| "no random numbers for a DPoP proof".to_string())?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let mut claims = serde_json::json!({
            "jti": hex::encode(jti),
            "htm": method,
            "htu": htu.as_str(),
            "iat": now,
        });
        if let Some(token) = token {
            let hash = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
            claims["ath"] = URL_SAFE_NO_PAD.encode(hash.as_ref()).into();
        }
        if let Some(nonce) = nonce {
            claims["nonce"] = nonce.into();
        }
        let header = serde_json::json!({ "typ": "dpop+jwt", "alg": ALGORITHM, "jwk": self.jwk });
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature = self
            .pair
            .sign(&self.rng, input.as_bytes())
            .map_err(|_| "cannot sign a DPoP proof".to_string())?;
        Ok(format!(
            "{input}.{}",
            URL_SAFE_NO_PAD.encode(signature.as_ref())
        ))
    }
}

/// Whether the authorization server takes DPoP proofs Switchyard can sign (its
/// metadata's `dpop_signing_alg_values_supported`).
pub(super) fn offered(metadata: &rmcp::transport::auth::AuthorizationMetadata) -> bool {
    metadata
        .additional_fields
        .get("dpop_signing_alg_values_supported")
        .and_then(|v| v.as_array())
        .is_some_and(|a| a.iter().any(|x| x.as_str() == Some(ALGORITHM)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A proof's header carries the public key only, its claims name the request and
    /// the token's hash, and its signature verifies with that key.
    #[test]
    fn a_proof_names_its_request_and_verifies_with_its_key() {
        let key = DpopKey::generate().unwrap();
        let proof = key
            .proof(
                "POST",
                "http://127.0.0.1:9/mcp?x=1#y",
                Some("tok"),
                Some("n1"),
            )
            .unwrap();
        let parts: Vec<&str> = proof.split('.').collect();
        assert_eq!(parts.len(), 3);
        let decode = |s: &str| -> serde_json::Value {
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(s).unwrap()).unwrap()
        };
        let header = decode(parts[0]);
        assert_eq!(header["typ"], "dpop+jwt");
        assert_eq!(header["alg"], "ES256");
        assert_eq!(header["jwk"]["kty"], "EC");
        assert!(header["jwk"].get("d").is_none());
        let claims = decode(parts[1]);
        assert_eq!(claims["htm"], "POST");
        assert_eq!(claims["htu"], "http://127.0.0.1:9/mcp");
        assert_eq!(claims["nonce"], "n1");
        // base64url(SHA-256("tok")).
        assert_eq!(claims["ath"], "GnZ0607njffhrEOak8P6jjyUV4TU3sn9jjARc4svHWI");
        let mut public = vec![4u8];
        for c in ["x", "y"] {
            public.extend(
                URL_SAFE_NO_PAD
                    .decode(header["jwk"][c].as_str().unwrap())
                    .unwrap(),
            );
        }
        let signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_FIXED, public)
            .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &signature)
            .expect("the signature verifies");
        // Fresh each time.
        let again = key
            .proof("POST", "http://127.0.0.1:9/mcp", None, None)
            .unwrap();
        assert_ne!(
            decode(again.split('.').nth(1).unwrap())["jti"],
            claims["jti"]
        );
    }
}
