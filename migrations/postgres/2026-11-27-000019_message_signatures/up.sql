-- Connector message signatures (docs/connector.md): a shop that requires them registers a
-- connector destination only when its verification answer proves the secret
-- (X-Verification-Proof), not when it merely echoes X-HMAC. Off for every shop until the
-- operator turns it on (mercer shop update --require-message-signatures on).
ALTER TABLE shop_settings ADD COLUMN require_message_signatures BOOLEAN NOT NULL DEFAULT FALSE;
