//! Shops, API tokens and shared secrets (OAuth in `oauth`, the console's sessions and audit log
//! in `console`).

mod console;
mod oauth;

use diesel::prelude::*;
use mercer_domain::Timestamp;
use mercer_domain::access::credentials::{ApiToken, NewApiToken};
use mercer_domain::access::secrets::{SecretKind, SharedSecret};
use mercer_domain::access::shop::{NewShop, Shop, ShopIdentifier};
use mercer_domain::access::{SecretRepository, ShopRepository, TokenRepository};
use mercer_domain::kernel::error::StoreResult;
use mercer_domain::kernel::ids::{ShopId, TokenId};

use crate::connection::on_backend;
use crate::repos::StoreTx;
use crate::rows::{
    NewShopRow, NewTokenRow, SecretRow, SecretValues, ShopRow, ShopSettingsRow, TokenRow,
};
use crate::schema::{api_tokens, shared_secrets, shop_settings, shops};
use crate::store::storage_error;

/// A shop and its settings, as one query's rows.
macro_rules! shops_with_settings {
    () => {
        shops::table.inner_join(shop_settings::table)
    };
}

fn shop_of((row, settings): (ShopRow, ShopSettingsRow)) -> StoreResult<Shop> {
    row.into_shop(settings)
}

impl ShopRepository for StoreTx<'_> {
    fn insert_shop(&mut self, shop: &NewShop) -> StoreResult<Shop> {
        let values = NewShopRow::from(shop);
        let row: ShopRow = on_backend!(&mut *self.conn, |c| {
            diesel::insert_into(shops::table)
                .values(&values)
                .returning(ShopRow::as_returning())
                .get_result(c)
        })
        .map_err(storage_error)?;
        let settings = ShopSettingsRow::defaults(row.id, row.created_at);
        diesel::insert_into(shop_settings::table)
            .values(&settings)
            .execute(self.conn)
            .map_err(storage_error)?;
        shop_of((row, settings))
    }

    fn shop_by_identifier(&mut self, identifier: &ShopIdentifier) -> StoreResult<Option<Shop>> {
        shops_with_settings!()
            .filter(shops::identifier.eq(identifier.as_str()))
            .select((ShopRow::as_select(), ShopSettingsRow::as_select()))
            .first(self.conn)
            .optional()
            .map_err(storage_error)?
            .map(shop_of)
            .transpose()
    }

    fn shop_by_domain(&mut self, domain: &str) -> StoreResult<Option<Shop>> {
        shops_with_settings!()
            .filter(shops::shop_domain.eq(domain))
            .select((ShopRow::as_select(), ShopSettingsRow::as_select()))
            .first(self.conn)
            .optional()
            .map_err(storage_error)?
            .map(shop_of)
            .transpose()
    }

    fn shop_by_id(&mut self, id: ShopId) -> StoreResult<Option<Shop>> {
        shops_with_settings!()
            .filter(shops::id.eq(id.0))
            .select((ShopRow::as_select(), ShopSettingsRow::as_select()))
            .first(self.conn)
            .optional()
            .map_err(storage_error)?
            .map(shop_of)
            .transpose()
    }

    fn count_shops(&mut self) -> StoreResult<i64> {
        shops::table
            .count()
            .get_result(self.conn)
            .map_err(storage_error)
    }

    fn update_shop_settings(&mut self, shop: &Shop) -> StoreResult<()> {
        diesel::update(shops::table.find(shop.id.0))
            .set((
                shops::timezone.eq(&shop.timezone),
                shops::currency.eq(&shop.currency),
                shops::currency_format.eq(&shop.currency_format),
                shops::updated_at.eq(shop.updated_at.as_micros()),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
        let settings = ShopSettingsRow::of(shop);
        diesel::update(shop_settings::table.find(shop.id.0))
            .set((
                shop_settings::order_retry_interval_seconds
                    .eq(settings.order_retry_interval_seconds),
                shop_settings::order_max_retries.eq(settings.order_max_retries),
                shop_settings::expiring_payment_notice_days
                    .eq(settings.expiring_payment_notice_days),
                shop_settings::updated_at.eq(settings.updated_at),
                shop_settings::abandoned_cart_emails.eq(settings.abandoned_cart_emails),
                shop_settings::gift_cards_enabled.eq(settings.gift_cards_enabled),
                shop_settings::gift_card_skus.eq(&settings.gift_card_skus),
                shop_settings::flat_shipping_rate_cents.eq(settings.flat_shipping_rate_cents),
                shop_settings::require_message_signatures.eq(settings.require_message_signatures),
                shop_settings::rate_limit_per_s.eq(settings.rate_limit_per_s),
                shop_settings::connector_events_rate_limit_per_s
                    .eq(settings.connector_events_rate_limit_per_s),
                shop_settings::storefront_rate_limit_per_s.eq(settings.storefront_rate_limit_per_s),
            ))
            .execute(self.conn)
            .map_err(storage_error)?;
        Ok(())
    }

    fn list_shops(&mut self) -> StoreResult<Vec<Shop>> {
        shops_with_settings!()
            .order(shops::id.asc())
            .select((ShopRow::as_select(), ShopSettingsRow::as_select()))
            .load(self.conn)
            .map_err(storage_error)?
            .into_iter()
            .map(shop_of)
            .collect()
    }

    fn mark_shop_deleted(&mut self, shop_id: ShopId, at: Timestamp) -> StoreResult<bool> {
        let changed = diesel::update(
            shops::table
                .filter(shops::id.eq(shop_id.0))
                .filter(shops::deleted_at.is_null()),
        )
        .set((
            shops::deleted_at.eq(at.as_micros()),
            shops::updated_at.eq(at.as_micros()),
        ))
        .execute(self.conn)
        .map_err(storage_error)?;
        Ok(changed == 1)
    }
}

impl TokenRepository for StoreTx<'_> {
    fn insert_token(&mut self, token: &NewApiToken) -> StoreResult<ApiToken> {
        let values = NewTokenRow::from(token);
        let row: TokenRow = on_backend!(&mut *self.conn, |c| {
            diesel::insert_into(api_tokens::table)
                .values(&values)
                .returning(TokenRow::as_returning())
                .get_result(c)
        })
        .map_err(storage_error)?;
        row.try_into()
    }

    fn active_token_by_hash(&mut self, token_hash: &str) -> StoreResult<Option<ApiToken>> {
        api_tokens::table
            .filter(api_tokens::token_hash.eq(token_hash))
            .filter(api_tokens::revoked_at.is_null())
            .select(TokenRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(storage_error)?
            .map(ApiToken::try_from)
            .transpose()
    }

    fn tokens_of_shop(&mut self, shop_id: ShopId) -> StoreResult<Vec<ApiToken>> {
        api_tokens::table
            .filter(api_tokens::shop_id.eq(shop_id.0))
            .order(api_tokens::id.asc())
            .select(TokenRow::as_select())
            .load(self.conn)
            .map_err(storage_error)?
            .into_iter()
            .map(ApiToken::try_from)
            .collect()
    }

    fn revoke_token(
        &mut self,
        shop_id: ShopId,
        token_id: TokenId,
        at: Timestamp,
    ) -> StoreResult<bool> {
        let changed = diesel::update(
            api_tokens::table
                .filter(api_tokens::id.eq(token_id.0))
                .filter(api_tokens::shop_id.eq(shop_id.0))
                .filter(api_tokens::revoked_at.is_null()),
        )
        .set(api_tokens::revoked_at.eq(at.as_micros()))
        .execute(self.conn)
        .map_err(storage_error)?;
        Ok(changed == 1)
    }

    fn revoke_shop_tokens(&mut self, shop_id: ShopId, at: Timestamp) -> StoreResult<usize> {
        diesel::update(
            api_tokens::table
                .filter(api_tokens::shop_id.eq(shop_id.0))
                .filter(api_tokens::revoked_at.is_null()),
        )
        .set(api_tokens::revoked_at.eq(at.as_micros()))
        .execute(self.conn)
        .map_err(storage_error)
    }

    fn note_token_use(
        &mut self,
        token_id: TokenId,
        at: Timestamp,
        unless_after: Timestamp,
    ) -> StoreResult<bool> {
        let changed = diesel::update(
            api_tokens::table
                .filter(api_tokens::id.eq(token_id.0))
                .filter(
                    api_tokens::last_used_at
                        .is_null()
                        .or(api_tokens::last_used_at.le(unless_after.as_micros())),
                ),
        )
        .set(api_tokens::last_used_at.eq(at.as_micros()))
        .execute(self.conn)
        .map_err(storage_error)?;
        Ok(changed == 1)
    }
}

impl SecretRepository for StoreTx<'_> {
    fn shared_secret(
        &mut self,
        shop_id: ShopId,
        kind: SecretKind,
    ) -> StoreResult<Option<SharedSecret>> {
        shared_secrets::table
            .filter(shared_secrets::shop_id.eq(shop_id.0))
            .filter(shared_secrets::kind.eq(kind.as_str()))
            .select(SecretRow::as_select())
            .first(self.conn)
            .optional()
            .map_err(storage_error)?
            .map(SharedSecret::try_from)
            .transpose()
    }

    fn save_shared_secret(&mut self, secret: &SharedSecret) -> StoreResult<()> {
        let values = SecretValues::from(secret);
        on_backend!(&mut *self.conn, |c| {
            diesel::insert_into(shared_secrets::table)
                .values(&values)
                .on_conflict((shared_secrets::shop_id, shared_secrets::kind))
                .do_update()
                .set(&values)
                .execute(c)
        })
        .map_err(storage_error)?;
        Ok(())
    }
}
