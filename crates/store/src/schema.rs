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

diesel::table! {
    destinations (id) {
        id -> BigInt,
        shop_id -> BigInt,
        topic -> Text,
        url -> Text,
        version -> Text,
        timeout_ms -> BigInt,
        created_at -> BigInt,
        updated_at -> BigInt,
        deleted_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    platform_customers (id) {
        id -> BigInt,
        shop_id -> BigInt,
        platform_id -> Text,
        email -> Text,
        first_name -> Text,
        last_name -> Text,
        phone -> Text,
        platform_created_at -> Nullable<BigInt>,
        platform_updated_at -> Nullable<BigInt>,
        platform_deleted_at -> Nullable<BigInt>,
        document -> Nullable<Text>,
        created_at -> BigInt,
        updated_at -> BigInt,
        deleted_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    customer_addresses (id) {
        id -> BigInt,
        shop_id -> BigInt,
        customer_id -> BigInt,
        address_key -> Text,
        platform_id -> Nullable<Text>,
        is_default -> Bool,
        document -> Text,
        created_at -> BigInt,
        updated_at -> BigInt,
        deleted_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    customer_labels (id) {
        id -> BigInt,
        shop_id -> BigInt,
        customer_id -> BigInt,
        name -> Text,
        created_at -> BigInt,
        updated_at -> BigInt,
        deleted_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    platform_orders (id) {
        id -> BigInt,
        shop_id -> BigInt,
        platform_id -> Text,
        platform_customer_id -> Nullable<Text>,
        order_number -> Nullable<Text>,
        fulfillment_status -> Nullable<Text>,
        financial_status -> Nullable<Text>,
        placed_at -> Nullable<BigInt>,
        platform_updated_at -> Nullable<BigInt>,
        platform_deleted_at -> Nullable<BigInt>,
        document -> Nullable<Text>,
        created_at -> BigInt,
        updated_at -> BigInt,
        deleted_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    platform_products (id) {
        id -> BigInt,
        shop_id -> BigInt,
        platform_id -> Text,
        name -> Nullable<Text>,
        handle -> Nullable<Text>,
        published -> Nullable<Bool>,
        platform_updated_at -> Nullable<BigInt>,
        platform_deleted_at -> Nullable<BigInt>,
        document -> Nullable<Text>,
        created_at -> BigInt,
        updated_at -> BigInt,
        deleted_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    product_variants (id) {
        id -> BigInt,
        shop_id -> BigInt,
        product_id -> BigInt,
        platform_id -> Nullable<Text>,
        sku -> Nullable<Text>,
        name -> Nullable<Text>,
        price -> Nullable<Text>,
        inventory_quantity -> Nullable<BigInt>,
        document -> Text,
        created_at -> BigInt,
        updated_at -> BigInt,
        deleted_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    platform_categories (id) {
        id -> BigInt,
        shop_id -> BigInt,
        platform_id -> Text,
        name -> Nullable<Text>,
        image_url -> Nullable<Text>,
        platform_updated_at -> Nullable<BigInt>,
        platform_deleted_at -> Nullable<BigInt>,
        document -> Nullable<Text>,
        created_at -> BigInt,
        updated_at -> BigInt,
        deleted_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    inbound_events (id) {
        id -> BigInt,
        shop_id -> BigInt,
        entity -> Text,
        action -> Text,
        platform_id -> Text,
        occurred_at -> BigInt,
        document -> Nullable<Text>,
        source -> Text,
        received_at -> BigInt,
        attempts -> BigInt,
        retry_at -> BigInt,
        last_error -> Nullable<Text>,
    }
}

diesel::table! {
    failed_inbound_events (id) {
        id -> BigInt,
        shop_id -> BigInt,
        entity -> Text,
        action -> Text,
        platform_id -> Text,
        occurred_at -> BigInt,
        document -> Nullable<Text>,
        source -> Text,
        received_at -> BigInt,
        attempts -> BigInt,
        error -> Text,
        failed_at -> BigInt,
    }
}

diesel::table! {
    sync_runs (id) {
        id -> BigInt,
        shop_id -> BigInt,
        topic -> Text,
        status -> Text,
        pages -> BigInt,
        items -> BigInt,
        skipped -> BigInt,
        error -> Nullable<Text>,
        started_at -> BigInt,
        heartbeat_at -> BigInt,
        finished_at -> Nullable<BigInt>,
        next_cursor -> Nullable<Text>,
    }
}

diesel::table! {
    connector_outbox (id) {
        id -> BigInt,
        shop_id -> BigInt,
        topic -> Text,
        call -> Text,
        status -> Text,
        attempts -> BigInt,
        next_attempt_at -> BigInt,
        locked_until -> Nullable<BigInt>,
        last_error -> Nullable<Text>,
        created_at -> BigInt,
        updated_at -> BigInt,
    }
}

diesel::table! {
    api_overrides (id) {
        id -> BigInt,
        public_id -> Text,
        shop_id -> BigInt,
        override_type -> Text,
        url -> Text,
        shared_secret -> Text,
        created_at -> BigInt,
        updated_at -> BigInt,
    }
}

diesel::table! {
    oauth_codes (id) {
        id -> BigInt,
        code_hash -> Text,
        app_id -> BigInt,
        shop_id -> BigInt,
        staff_id -> BigInt,
        redirect_uri -> Text,
        scopes -> Text,
        code_challenge -> Nullable<Text>,
        expires_at -> BigInt,
        used_at -> Nullable<BigInt>,
        token_id -> Nullable<BigInt>,
        created_at -> BigInt,
    }
}

diesel::joinable!(customer_addresses -> platform_customers (customer_id));
diesel::joinable!(customer_labels -> platform_customers (customer_id));
diesel::joinable!(product_variants -> platform_products (product_id));

diesel::allow_tables_to_appear_in_same_query!(
    shops,
    api_tokens,
    shared_secrets,
    staff_accounts,
    oauth_apps,
    destinations,
    platform_customers,
    customer_addresses,
    customer_labels,
    platform_orders,
    platform_products,
    product_variants,
    platform_categories,
    inbound_events,
    failed_inbound_events,
    sync_runs,
    connector_outbox,
    webhook_endpoints,
    webhook_messages,
    webhook_attempts,
    api_overrides,
    oauth_codes,
);

diesel::table! {
    webhook_endpoints (id) {
        id -> BigInt,
        public_id -> Text,
        shop_id -> BigInt,
        kind -> Text,
        topic -> Text,
        callback_url -> Text,
        secret -> Nullable<Text>,
        disabled_at -> Nullable<BigInt>,
        disabled_reason -> Nullable<Text>,
        failing_since -> Nullable<BigInt>,
        created_at -> BigInt,
        updated_at -> BigInt,
        deleted_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    webhook_messages (id) {
        id -> BigInt,
        message_id -> Text,
        shop_id -> BigInt,
        endpoint_id -> BigInt,
        topic -> Text,
        payload -> Text,
        status -> Text,
        attempts -> BigInt,
        next_attempt_at -> BigInt,
        created_at -> BigInt,
        updated_at -> BigInt,
        delivered_at -> Nullable<BigInt>,
    }
}

diesel::table! {
    webhook_attempts (id) {
        id -> BigInt,
        message_id -> BigInt,
        attempted_at -> BigInt,
        status -> Nullable<Integer>,
        latency_us -> BigInt,
        response -> Nullable<Text>,
        error -> Nullable<Text>,
        retry_after_ms -> Nullable<BigInt>,
    }
}

diesel::table! {
    jobs (id) {
        id -> BigInt,
        kind -> Text,
        payload -> Text,
        unique_key -> Nullable<Text>,
        state -> Text,
        run_at -> BigInt,
        attempts -> BigInt,
        max_attempts -> BigInt,
        locked_by -> Nullable<Text>,
        locked_until -> Nullable<BigInt>,
        again_at -> Nullable<BigInt>,
        last_error -> Nullable<Text>,
        created_at -> BigInt,
        updated_at -> BigInt,
    }
}
