//! End-to-end tests: the real `mercer` binary, over HTTP, on SQLite and on PostgreSQL.
//! One test binary for the whole suite keeps link times down.

#![allow(clippy::unwrap_used)] // test code: a panic is a failed assertion

mod analytics;
mod answer_shapes;
mod backups;
mod box_builder;
mod box_catalogue;
mod box_orders;
mod box_shoppers;
mod browser;
mod chaos;
mod checkout;
mod checkout_settings;
mod cli;
mod client_generators;
mod conformance;
mod connector;
mod console;
mod console_pages;
mod deploying;
mod docs;
mod dunning;
mod events;
mod foundation;
mod front_door;
mod hostile_bodies;
mod hostile_input;
mod hostile_probe;
mod imports;
mod jobs;
mod lifecycle;
mod message_signatures;
mod oauth;
mod openapi;
mod pause_and_cancel;
mod portal;
mod portal_tour;
mod privacy;
mod readme;
mod request_ids;
mod route_scopes;
mod scheduler;
mod subscription_customers;
mod subscription_groups;
mod subscription_webhooks;
mod subscriptions;
mod throttling;
mod traces;
mod upgrades;
mod vendure;
mod verifiers;
mod webhook_guide;
mod webhook_retention;
mod webhooks;
