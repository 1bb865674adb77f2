//! Reading a queue's events through the [`Client`]: a stream that resumes where it stopped, a
//! consumer group's share of it, and one task's events.

use std::collections::VecDeque;
use std::time::Duration;

use crate::{BrokerError, Client, EventCursor, Events, QueueName, TaskEvent};

/// Events per read.
const BATCH: usize = 100;
/// Longest wait of one read for a first event: keeps a dropped stream's reader short-lived.
const BLOCK: Duration = Duration::from_secs(2);
/// The pause after a failed read, doubled up to [`MAX_PAUSE`] while reads keep failing.
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(2);

/// The pause a stream takes after a failed read: [`FIRST_PAUSE`], doubled up to [`MAX_PAUSE`]
/// while reads keep failing, back to the first after a read that worked.
#[derive(Debug)]
struct Pause(Duration);

impl Pause {
    fn new() -> Self {
        Self(FIRST_PAUSE)
    }

    fn reset(&mut self) {
        self.0 = FIRST_PAUSE;
    }

    async fn wait(&mut self) {
        tokio::time::sleep(self.0).await;
        self.0 = (self.0 * 2).min(MAX_PAUSE);
    }
}

impl<B: Events + Clone> Client<B> {
    /// The events of `queue` from `from` on ([`EventCursor::New`]: those written after this
    /// call). The stream reads on a connection of its own and resumes after the last event it
    /// read when a read fails (the error is yielded once, then reading goes on), so a reconnect
    /// loses nothing the queue's stream still keeps ([`crate::EVENTS_KEPT`]).
    /// [`BrokerError::EventsOff`] when the queue's stream is off.
    pub async fn events(
        &self,
        queue: &str,
        from: EventCursor,
    ) -> Result<EventStream<B>, BrokerError> {
        let queue = QueueName::new(queue)?;
        let broker = self.broker().clone();
        let after = match from {
            EventCursor::New => broker.last_event_id(&queue).await?,
            EventCursor::Oldest => {
                if !broker.events_on(&queue).await? {
                    return Err(BrokerError::EventsOff {
                        queue: queue.as_str().to_string(),
                    });
                }
                "0-0".to_string()
            }
            EventCursor::After(id) => id,
        };
        Ok(EventStream {
            broker,
            queue,
            reader: None,
            read_after: after,
            buffer: VecDeque::new(),
            task: None,
            ended: false,
            pause: Pause::new(),
        })
    }

    /// The events of task `id` of `queue` from now on, ending after its final one (completed,
    /// dead-lettered or cancelled). A task that already ended before this call ends nothing:
    /// read its record ([`crate::Inspect::task`]) or its outcome first.
    pub async fn watch(&self, queue: &str, id: &str) -> Result<EventStream<B>, BrokerError> {
        let mut stream = self.events(queue, EventCursor::New).await?;
        stream.task = Some(id.to_string());
        Ok(stream)
    }

    /// `consumer`'s share of consumer group `group` on `queue`'s events (made, starting with the
    /// events written after this call, unless it exists): each event goes to one consumer of
    /// the group and stays pending until [`EventGroupStream::ack`]. A consumer that restarts
    /// under the same name first gets back what it had not acked; events another consumer left
    /// unacked for `claim_idle` (it died) are taken over. At least once: a relay that dies
    /// between its side effect and its ack sends that event again.
    pub async fn event_group(
        &self,
        queue: &str,
        group: &str,
        consumer: &str,
        claim_idle: Duration,
    ) -> Result<EventGroupStream<B>, BrokerError> {
        let queue = QueueName::new(queue)?;
        if group.is_empty() || consumer.is_empty() {
            return Err(BrokerError::InvalidOption(
                "an event group and its consumer need names".into(),
            ));
        }
        let broker = self.broker().clone();
        broker.create_event_group(&queue, group).await?;
        Ok(EventGroupStream {
            broker,
            queue,
            group: group.to_string(),
            consumer: consumer.to_string(),
            claim_idle,
            reader: None,
            pending_after: Some("0-0".to_string()),
            highest: "0-0".to_string(),
            unsure: false,
            buffer: VecDeque::new(),
            pause: Pause::new(),
        })
    }
}

/// A queue's events in order ([`Client::events`], [`Client::watch`]).
pub struct EventStream<B: Events> {
    broker: B,
    queue: QueueName,
    reader: Option<B::EventReader>,
    /// The id of the last event read from the store: the next read starts after it.
    read_after: String,
    buffer: VecDeque<TaskEvent>,
    /// Only this task's events, until its final one.
    task: Option<String>,
    ended: bool,
    pause: Pause,
}

impl<B: Events> std::fmt::Debug for EventStream<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream")
            .field("queue", &self.queue)
            .field("read_after", &self.read_after)
            .field("buffered", &self.buffer.len())
            .field("task", &self.task)
            .finish()
    }
}

impl<B: Events> EventStream<B> {
    /// The next event; waits for one. `None` only for a [`Client::watch`] whose task ended.
    /// A failed read answers its error once; the next call reads again from where the stream
    /// was (a new connection if need be), after a pause that grows while reads keep failing.
    pub async fn next(&mut self) -> Option<Result<TaskEvent, BrokerError>> {
        loop {
            while let Some(e) = self.buffer.pop_front() {
                match &self.task {
                    Some(id) if *id != e.task_id => continue,
                    Some(_) if e.event.is_final() => {
                        self.ended = true;
                        self.buffer.clear();
                        return Some(Ok(e));
                    }
                    _ => return Some(Ok(e)),
                }
            }
            if self.ended {
                return None;
            }
            match self.fill().await {
                Ok(()) => self.pause.reset(),
                Err(e) => {
                    self.reader = None;
                    self.pause.wait().await;
                    return Some(Err(e));
                }
            }
        }
    }

    /// The id of the last event read from the store: a new stream made with
    /// [`EventCursor::After`] this id goes on from here.
    pub fn position(&self) -> &str {
        &self.read_after
    }

    async fn fill(&mut self) -> Result<(), BrokerError> {
        if self.reader.is_none() {
            self.reader = Some(self.broker.open_event_reader().await?);
        }
        let Some(reader) = self.reader.as_mut() else {
            return Ok(());
        };
        let events = self
            .broker
            .read_events(reader, &self.queue, &self.read_after, BATCH, BLOCK)
            .await?;
        if let Some(last) = events.last() {
            self.read_after = last.id.clone();
        }
        self.buffer.extend(events);
        Ok(())
    }
}

/// One consumer's share of a consumer group on a queue's events ([`Client::event_group`]).
///
/// Cancel-safe: [`EventGroupStream::next`] may be dropped at any await (in a `select!`, under a
/// timeout) and no event is lost. Events read and not yet handed out wait in the stream; and a
/// read of new events whose answer never came back (the future was dropped while Redis ran it,
/// or the connection failed) has left them pending for this consumer, where the next call
/// reads them again before anything new.
pub struct EventGroupStream<B: Events> {
    broker: B,
    queue: QueueName,
    group: String,
    consumer: String,
    claim_idle: Duration,
    reader: Option<B::EventReader>,
    /// While set, this consumer's own unacked events after this id are read first.
    pending_after: Option<String>,
    /// The greatest event id this stream has read: a read of new events hands out only ids
    /// past every id the group delivered before, so what a lost read took lies after it.
    highest: String,
    /// A read of new events went out and its answer was not taken in: its events may be
    /// pending for this consumer, unseen.
    unsure: bool,
    buffer: VecDeque<TaskEvent>,
    pause: Pause,
}

impl<B: Events> std::fmt::Debug for EventGroupStream<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventGroupStream")
            .field("queue", &self.queue)
            .field("group", &self.group)
            .field("consumer", &self.consumer)
            .field("buffered", &self.buffer.len())
            .finish()
    }
}

impl<B: Events> EventGroupStream<B> {
    /// The next event for this consumer; waits for one. It stays pending in the group until
    /// [`EventGroupStream::ack`]. A failed read answers its error once, as
    /// [`EventStream::next`] does. Cancel-safe (see the type's docs).
    pub async fn next(&mut self) -> Option<Result<TaskEvent, BrokerError>> {
        loop {
            if let Some(e) = self.buffer.pop_front() {
                return Some(Ok(e));
            }
            match self.fill().await {
                Ok(()) => self.pause.reset(),
                Err(e) => {
                    self.reader = None;
                    self.pause.wait().await;
                    return Some(Err(e));
                }
            }
        }
    }

    /// Marks `event` handled: no consumer of the group gets it again.
    pub async fn ack(&self, event: &TaskEvent) -> Result<(), BrokerError> {
        self.broker
            .ack_events(&self.queue, &self.group, std::slice::from_ref(&event.id))
            .await
            .map(|_| ())
    }

    /// Takes in events read from the store.
    fn take(&mut self, events: Vec<TaskEvent>) {
        for e in &events {
            if later(&e.id, &self.highest) {
                self.highest.clone_from(&e.id);
            }
        }
        self.buffer.extend(events);
    }

    async fn fill(&mut self) -> Result<(), BrokerError> {
        if self.reader.is_none() {
            self.reader = Some(self.broker.open_event_reader().await?);
        }
        let Some(reader) = self.reader.as_mut() else {
            return Ok(());
        };
        if self.unsure && self.pending_after.is_none() {
            // Redis may have delivered what the lost read asked for: this consumer's pending
            // events past every id seen hold it (the events handed out and not acked yet are
            // not past it, so none comes twice).
            self.pending_after = Some(self.highest.clone());
        }
        self.unsure = false;
        if let Some(after) = self.pending_after.clone() {
            let own = self
                .broker
                .read_event_group(
                    reader,
                    &self.queue,
                    &self.group,
                    &self.consumer,
                    Some(&after),
                    BATCH,
                    Duration::ZERO,
                )
                .await?;
            self.pending_after = own.last().map(|e| e.id.clone());
            self.take(own);
            return Ok(());
        }
        if !self.claim_idle.is_zero() {
            let taken = self
                .broker
                .claim_events(
                    &self.queue,
                    &self.group,
                    &self.consumer,
                    self.claim_idle,
                    BATCH,
                )
                .await?;
            // A take-over whose answer is lost leaves its events with this consumer, idle
            // again: taken over again after `claim_idle`, by this consumer or another.
            if !taken.is_empty() {
                self.take(taken);
                return Ok(());
            }
        }
        // Blocks no longer than the claim period, so another consumer's dead share is taken
        // over about `claim_idle` after it stopped, even on a quiet stream.
        let block = if self.claim_idle.is_zero() {
            BLOCK
        } else {
            BLOCK.min(self.claim_idle)
        };
        // Set until the answer is taken in: dropped or failed on the way, the next call reads
        // this consumer's pending events first.
        self.unsure = true;
        let new = self
            .broker
            .read_event_group(
                reader,
                &self.queue,
                &self.group,
                &self.consumer,
                None,
                BATCH,
                block,
            )
            .await?;
        self.take(new);
        self.unsure = false;
        Ok(())
    }
}

/// Whether stream entry id `a` comes after `b` (`<ms>-<seq>`, compared as numbers; an id that
/// does not read so comes after nothing).
fn later(a: &str, b: &str) -> bool {
    fn parts(id: &str) -> Option<(u64, u64)> {
        let (ms, seq) = id.split_once('-')?;
        Some((ms.parse().ok()?, seq.parse().ok()?))
    }
    match (parts(a), parts(b)) {
        (Some(a), Some(b)) => a > b,
        (Some(_), None) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::later;

    #[test]
    fn stream_ids_compare_as_numbers() {
        assert!(later("10-0", "9-5"));
        assert!(later("5-10", "5-9"));
        assert!(!later("5-9", "5-9"));
        assert!(later("1-0", "0-0"));
        assert!(!later("junk", "0-0"));
    }
}
