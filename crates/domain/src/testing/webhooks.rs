//! Webhook endpoints, messages and attempts, in memory.

use super::MemoryState;
use crate::kernel::error::{StorageError, StoreResult};
use crate::kernel::ids::ShopId;
use crate::kernel::ids::{MessageId, WebhookId};
use crate::kernel::time::Timestamp;
use crate::webhooks::*;
use crate::webhooks::{
    DeliveryAttempt, MessageStatus, MessageUpdate, NewWebhookEndpoint, NewWebhookMessage,
    WebhookEndpoint, WebhookKind, WebhookMessage,
};

/// Webhooks in memory: enough to test the use cases; the dispatcher's claiming and leasing is
/// tested against the real databases.
impl WebhookRepository for MemoryState {
    fn insert_webhook_endpoint(
        &mut self,
        new: &NewWebhookEndpoint,
    ) -> StoreResult<WebhookEndpoint> {
        let endpoint = WebhookEndpoint {
            id: WebhookId(self.webhook_endpoints.len() as i64 + 1),
            public_id: crate::access::credentials::random_hex(16),
            shop_id: new.shop_id,
            kind: new.kind,
            topic: new.topic.clone(),
            callback_url: new.callback_url.clone(),
            secret: new.secret.clone(),
            disabled_at: None,
            disabled_reason: None,
            failing_since: None,
            created_at: new.created_at,
            updated_at: new.created_at,
            rate_limit_per_s: None,
        };
        self.webhook_endpoints.push((endpoint.clone(), false));
        Ok(endpoint)
    }

    fn webhook_endpoint(
        &mut self,
        shop_id: ShopId,
        public_id: &str,
    ) -> StoreResult<Option<WebhookEndpoint>> {
        Ok(self
            .webhook_endpoints
            .iter()
            .find(|(e, deleted)| !deleted && e.shop_id == shop_id && e.public_id == public_id)
            .map(|(e, _)| e.clone()))
    }

    fn webhook_endpoints_by_ids(
        &mut self,
        ids: &[WebhookId],
    ) -> StoreResult<Vec<(WebhookEndpoint, bool)>> {
        Ok(self
            .webhook_endpoints
            .iter()
            .filter(|(e, _)| ids.contains(&e.id))
            .cloned()
            .collect())
    }

    fn webhook_endpoints(
        &mut self,
        shop_id: ShopId,
        kind: WebhookKind,
    ) -> StoreResult<Vec<WebhookEndpoint>> {
        Ok(self
            .webhook_endpoints
            .iter()
            .filter(|(e, deleted)| !deleted && e.shop_id == shop_id && e.kind == kind)
            .map(|(e, _)| e.clone())
            .collect())
    }

    fn active_webhook_endpoints(
        &mut self,
        shop_id: ShopId,
        kind: WebhookKind,
        topics: &[&str],
    ) -> StoreResult<Vec<WebhookEndpoint>> {
        Ok(self
            .webhook_endpoints(shop_id, kind)?
            .into_iter()
            .filter(|e| topics.contains(&e.topic.as_str()) && e.is_active())
            .collect())
    }

    fn update_webhook_endpoint(
        &mut self,
        changed: &WebhookEndpoint,
        now: Timestamp,
    ) -> StoreResult<()> {
        if let Some((endpoint, _)) = self
            .webhook_endpoints
            .iter_mut()
            .find(|(e, _)| e.id == changed.id)
        {
            endpoint.callback_url = changed.callback_url.clone();
            endpoint.topic = changed.topic.clone();
            endpoint.secret = changed.secret.clone();
            endpoint.updated_at = now;
        }
        Ok(())
    }

    fn delete_webhook_endpoint(&mut self, id: WebhookId, now: Timestamp) -> StoreResult<()> {
        if let Some(entry) = self.webhook_endpoints.iter_mut().find(|(e, _)| e.id == id) {
            entry.1 = true;
        }
        self.end_pending_webhook_messages(id, MessageStatus::Cancelled, now)?;
        Ok(())
    }

    fn set_webhook_endpoint_health(
        &mut self,
        id: WebhookId,
        failing_since: Option<Timestamp>,
        disabled: Option<(Timestamp, &str)>,
        now: Timestamp,
    ) -> StoreResult<()> {
        if let Some((endpoint, _)) = self.webhook_endpoints.iter_mut().find(|(e, _)| e.id == id) {
            endpoint.failing_since = failing_since;
            if let Some((at, reason)) = disabled {
                endpoint.disabled_at = Some(at);
                endpoint.disabled_reason = Some(reason.to_string());
            }
            endpoint.updated_at = now;
        }
        Ok(())
    }

    fn enable_webhook_endpoint(&mut self, id: WebhookId, now: Timestamp) -> StoreResult<()> {
        if let Some((endpoint, _)) = self.webhook_endpoints.iter_mut().find(|(e, _)| e.id == id) {
            endpoint.disabled_at = None;
            endpoint.disabled_reason = None;
            endpoint.failing_since = None;
            endpoint.updated_at = now;
        }
        Ok(())
    }

    fn insert_webhook_messages(
        &mut self,
        messages: &[NewWebhookMessage],
    ) -> StoreResult<Vec<MessageId>> {
        let mut ids = Vec::new();
        for new in messages {
            // As the store's unique `message_id`.
            if self
                .webhook_messages
                .iter()
                .any(|m| m.message_id == new.message_id)
            {
                return Err(StorageError::unique_violation("the message id is taken"));
            }
            let id = MessageId(self.webhook_messages.len() as i64 + 1);
            self.webhook_messages.push(WebhookMessage {
                id,
                message_id: new.message_id.clone(),
                shop_id: new.shop_id,
                endpoint_id: new.endpoint_id,
                topic: new.topic.clone(),
                payload: new.payload.clone(),
                status: MessageStatus::Pending,
                attempts: 0,
                next_attempt_at: new.created_at,
                created_at: new.created_at,
                delivered_at: None,
                request_id: new.request_id.clone(),
                trace_parent: new.trace_parent.clone(),
                purged_at: None,
            });
            if let Some(subject) = &new.subject {
                self.message_subjects.insert(id.0, subject.clone());
            }
            ids.push(id);
        }
        Ok(ids)
    }

    fn insert_webhook_messages_for_live_endpoints(
        &mut self,
        kind: WebhookKind,
        messages: &[NewWebhookMessage],
    ) -> StoreResult<Vec<Option<MessageId>>> {
        let mut ids = Vec::with_capacity(messages.len());
        for message in messages {
            let live = self.webhook_endpoints.iter().any(|(e, deleted)| {
                !deleted
                    && e.id == message.endpoint_id
                    && e.shop_id == message.shop_id
                    && e.kind == kind
                    && e.topic == message.topic
                    && e.is_active()
            });
            ids.push(if live {
                self.insert_webhook_messages(std::slice::from_ref(message))?
                    .first()
                    .copied()
            } else {
                None
            });
        }
        Ok(ids)
    }

    fn claim_webhook_messages(
        &mut self,
        now: Timestamp,
        limit: usize,
        lease_until: Timestamp,
    ) -> StoreResult<Vec<WebhookMessage>> {
        let mut due: Vec<&WebhookMessage> = self
            .webhook_messages
            .iter()
            .filter(|m| m.status == MessageStatus::Pending && m.next_attempt_at <= now)
            .collect();
        due.sort_by_key(|m| m.next_attempt_at);
        let mut ids: Vec<MessageId> = due.into_iter().take(limit).map(|m| m.id).collect();
        ids.sort_unstable();
        let mut claimed = Vec::with_capacity(ids.len());
        for message in self.webhook_messages.iter_mut() {
            if ids.contains(&message.id) {
                message.next_attempt_at = lease_until;
                claimed.push(message.clone());
            }
        }
        Ok(claimed)
    }

    fn set_webhook_rate_limit(
        &mut self,
        id: WebhookId,
        rate_limit_per_s: Option<u32>,
        now: Timestamp,
    ) -> StoreResult<()> {
        let (endpoint, _) = self
            .webhook_endpoints
            .iter_mut()
            .find(|(e, _)| e.id == id)
            .ok_or_else(|| StorageError::other("no such endpoint"))?;
        endpoint.rate_limit_per_s = rate_limit_per_s;
        endpoint.updated_at = now;
        Ok(())
    }

    /// Throttled messages are claimed like the others here (see `claim_webhook_messages`):
    /// send times are tested against the real databases.
    fn claim_throttled_webhook_messages(
        &mut self,
        _now: Timestamp,
        _limit: usize,
        _ready_by: Timestamp,
        _stretch: std::time::Duration,
        _lease_until: Timestamp,
    ) -> StoreResult<Vec<Reservation>> {
        Ok(Vec::new())
    }

    fn release_webhook_messages(&mut self, ids: &[MessageId], at: Timestamp) -> StoreResult<()> {
        for message in self.webhook_messages.iter_mut() {
            if ids.contains(&message.id) {
                message.next_attempt_at = at;
            }
        }
        Ok(())
    }

    fn webhook_throttle_upkeep(&mut self, _now: Timestamp) -> StoreResult<bool> {
        Ok(self
            .webhook_endpoints
            .iter()
            .any(|(e, deleted)| !deleted && e.rate_limit_per_s.is_some()))
    }

    fn pending_webhook_messages(
        &mut self,
        endpoint_ids: &[WebhookId],
    ) -> StoreResult<Vec<(WebhookId, i64)>> {
        let mut counts: Vec<(WebhookId, i64)> = Vec::new();
        for message in &self.webhook_messages {
            if message.status != MessageStatus::Pending
                || !endpoint_ids.contains(&message.endpoint_id)
            {
                continue;
            }
            match counts.iter_mut().find(|(id, _)| *id == message.endpoint_id) {
                Some((_, count)) => *count += 1,
                None => counts.push((message.endpoint_id, 1)),
            }
        }
        Ok(counts)
    }

    fn record_webhook_attempts(
        &mut self,
        attempts: &[DeliveryAttempt],
        updates: &[MessageUpdate],
    ) -> StoreResult<()> {
        self.webhook_attempts.extend(attempts.iter().cloned());
        for update in updates {
            if let Some(message) = self.webhook_messages.iter_mut().find(|m| m.id == update.id) {
                message.status = update.status;
                message.attempts = update.attempts;
                message.next_attempt_at = update.next_attempt_at;
                message.delivered_at = update.delivered_at;
            }
        }
        Ok(())
    }

    fn end_pending_webhook_messages(
        &mut self,
        endpoint_id: WebhookId,
        status: MessageStatus,
        _now: Timestamp,
    ) -> StoreResult<u64> {
        let mut ended = 0;
        for message in self
            .webhook_messages
            .iter_mut()
            .filter(|m| m.endpoint_id == endpoint_id && m.status == MessageStatus::Pending)
        {
            message.status = status;
            ended += 1;
        }
        Ok(ended)
    }

    fn webhook_queue_depth(&mut self, now: Timestamp) -> StoreResult<(i64, i64)> {
        let pending = self
            .webhook_messages
            .iter()
            .filter(|m| m.status == MessageStatus::Pending);
        let (due, later): (Vec<_>, Vec<_>) = pending.partition(|m| m.next_attempt_at <= now);
        Ok((due.len() as i64, later.len() as i64))
    }

    fn webhook_message(&mut self, message_id: &str) -> StoreResult<Option<WebhookMessage>> {
        Ok(self
            .webhook_messages
            .iter()
            .find(|m| m.message_id == message_id)
            .cloned())
    }

    fn webhook_messages_of_endpoint(
        &mut self,
        endpoint_id: WebhookId,
        limit: usize,
    ) -> StoreResult<Vec<WebhookMessage>> {
        Ok(self
            .webhook_messages
            .iter()
            .rev()
            .filter(|m| m.endpoint_id == endpoint_id)
            .take(limit)
            .cloned()
            .collect())
    }

    fn webhook_messages_of_shop(
        &mut self,
        shop_id: ShopId,
        filter: &crate::webhooks::console::MessageFilter,
        before: Option<MessageId>,
        limit: usize,
    ) -> StoreResult<Vec<WebhookMessage>> {
        Ok(self
            .webhook_messages
            .iter()
            .rev()
            .filter(|m| m.shop_id == shop_id && before.is_none_or(|id| m.id < id))
            .filter(|m| filter.topic.as_ref().is_none_or(|topic| m.topic == *topic))
            .filter(|m| filter.status.is_none_or(|status| m.status == status))
            .take(limit)
            .cloned()
            .collect())
    }

    fn webhook_message_row_at(
        &mut self,
        shop_id: ShopId,
        at: Timestamp,
    ) -> StoreResult<Option<MessageId>> {
        Ok(self
            .webhook_messages
            .iter()
            .filter(|m| m.shop_id == shop_id && m.created_at <= at)
            .max_by_key(|m| (m.created_at, m.id))
            .map(|m| m.id))
    }

    fn webhook_messages_about(
        &mut self,
        shop_id: ShopId,
        subject: &str,
        limit: usize,
    ) -> StoreResult<Vec<WebhookMessage>> {
        Ok(self
            .webhook_messages
            .iter()
            .rev()
            .filter(|m| {
                m.shop_id == shop_id
                    && self.message_subjects.get(&m.id.0).map(String::as_str) == Some(subject)
            })
            .take(limit)
            .cloned()
            .collect())
    }

    fn count_shop_webhook_messages(
        &mut self,
        shop_id: ShopId,
        status: MessageStatus,
    ) -> StoreResult<i64> {
        Ok(self
            .webhook_messages
            .iter()
            .filter(|message| message.shop_id == shop_id && message.status == status)
            .count() as i64)
    }

    fn webhook_attempts(&mut self, message_row: MessageId) -> StoreResult<Vec<DeliveryAttempt>> {
        Ok(self
            .webhook_attempts
            .iter()
            .filter(|a| a.message_row == message_row)
            .cloned()
            .collect())
    }

    fn last_webhook_attempts(
        &mut self,
        message_rows: &[MessageId],
    ) -> StoreResult<Vec<DeliveryAttempt>> {
        Ok(message_rows
            .iter()
            .filter_map(|row| {
                self.webhook_attempts
                    .iter()
                    .rev()
                    .find(|a| a.message_row == *row)
                    .cloned()
            })
            .collect())
    }

    fn requeue_webhook_message(&mut self, id: MessageId, now: Timestamp) -> StoreResult<()> {
        if let Some(message) = self
            .webhook_messages
            .iter_mut()
            .find(|m| m.id == id && m.purged_at.is_none())
        {
            message.status = MessageStatus::Pending;
            message.next_attempt_at = now;
        }
        Ok(())
    }

    fn requeue_failed_webhook_messages(
        &mut self,
        endpoint_id: WebhookId,
        since: Timestamp,
        now: Timestamp,
    ) -> StoreResult<u64> {
        let mut count = 0;
        for message in self.webhook_messages.iter_mut().filter(|m| {
            m.endpoint_id == endpoint_id
                && m.status == MessageStatus::Failed
                && m.created_at >= since
                && m.purged_at.is_none()
        }) {
            message.status = MessageStatus::Pending;
            message.next_attempt_at = now;
            count += 1;
        }
        Ok(count)
    }

    fn purge_webhook_messages(
        &mut self,
        finished_before: Timestamp,
        limit: usize,
        now: Timestamp,
    ) -> StoreResult<usize> {
        // A finished message's final time: its delivery, or its last attempt or ending. The
        // oldest finished go first.
        let finished = |m: &WebhookMessage| m.delivered_at.unwrap_or(m.next_attempt_at);
        let mut expired: Vec<(Timestamp, MessageId)> = self
            .webhook_messages
            .iter()
            .filter(|m| {
                m.purged_at.is_none()
                    && m.status != MessageStatus::Pending
                    && finished(m) < finished_before
            })
            .map(|m| (finished(m), m.id))
            .collect();
        expired.sort();
        let purged: Vec<MessageId> = expired.into_iter().take(limit).map(|(_, id)| id).collect();
        for message in self
            .webhook_messages
            .iter_mut()
            .filter(|m| purged.contains(&m.id))
        {
            message.payload.clear();
            message.purged_at = Some(now);
        }
        self.webhook_attempts
            .retain(|attempt| !purged.contains(&attempt.message_row));
        Ok(purged.len())
    }

    fn count_disabled_webhook_endpoints(&mut self) -> StoreResult<i64> {
        Ok(self
            .webhook_endpoints
            .iter()
            .filter(|(e, deleted)| !deleted && !e.is_active())
            .count() as i64)
    }
}
