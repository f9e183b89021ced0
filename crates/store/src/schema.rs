//! The diesel schema, one for both databases (migrations/sqlite and migrations/postgres create
//! the same tables and types).

diesel::table! {
    shops (id) {
        id -> BigInt,
        identifier -> Text,
        shop_domain -> Text,
        custom_domain -> Nullable<Text>,
        platform_type -> Text,
        timezone -> Text,
        currency -> Text,
        currency_format -> Text,
        shop_owner -> Text,
        admin_email -> Text,
        pii_redacted_at -> Nullable<BigInt>,
        created_at -> BigInt,
        updated_at -> BigInt,
        deleted_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    api_tokens (id) {
        id -> BigInt,
        shop_id -> BigInt,
        name -> Text,
        token_hash -> Text,
        token_prefix -> Text,
        scopes -> Text,
        source -> Text,
        created_at -> BigInt,
        revoked_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    shared_secrets (id) {
        id -> BigInt,
        shop_id -> BigInt,
        kind -> Text,
        current_secret -> Text,
        previous_secret -> Nullable<Text>,
        previous_valid_until -> Nullable<BigInt>,
        created_at -> BigInt,
        updated_at -> BigInt,
    }
}

diesel::table! {
    staff_accounts (id) {
        id -> BigInt,
        shop_id -> BigInt,
        email -> Text,
        password_hash -> Text,
        failed_sign_ins -> Integer,
        locked_until -> Nullable<BigInt>,
        created_at -> BigInt,
        updated_at -> BigInt,
    }
}

diesel::table! {
    oauth_apps (id) {
        id -> BigInt,
        client_id -> Text,
        client_secret_hash -> Text,
        name -> Text,
        redirect_uris -> Text,
        created_at -> BigInt,
        updated_at -> BigInt,
        revoked_at -> Nullable<BigInt>,
    }
}

diesel::joinable!(api_tokens -> shops (shop_id));
diesel::joinable!(shared_secrets -> shops (shop_id));
diesel::joinable!(staff_accounts -> shops (shop_id));

diesel::allow_tables_to_appear_in_same_query!(
    shops,
    api_tokens,
    shared_secrets,
    staff_accounts,
    oauth_apps
);
