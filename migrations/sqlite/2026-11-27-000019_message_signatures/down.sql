ALTER TABLE shop_settings DROP COLUMN require_message_signatures;
