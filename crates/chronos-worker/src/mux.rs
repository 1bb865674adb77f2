use std::collections::HashMap;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;
use chronos_core::{decode_payload, DecodeError, TaskArgs, TaskEnvelope};
use futures::future::BoxFuture;
use serde::Serialize;

use crate::{Context, Task, TaskError, WorkerError};

/// Runs tasks of one type. Implemented for every `Fn(Context, Task<T>) -> impl Future` whose
/// output is `Result<R, TaskError>` with a serde `R`, so a closure or an `async fn` is a handler.
#[async_trait]
pub trait Handler<T>: Send + Sync + 'static {
    /// What a succeeded attempt returns: its result. `()` (or `None`) means none. Any other
    /// value is encoded with MessagePack and handed to the broker with the acknowledgement: it is
    /// kept with the task while the task's retention lasts (`Client::result`), passed to the
    /// next step of a chain, and collected by a group that asked for results.
    type Output: Serialize + Send + 'static;

    /// Runs one attempt. `Ok` acknowledges the task; an error retries or dead-letters it as its
    /// [`crate::FailureKind`] says. A panic is caught and counts as a retryable failure.
    async fn handle(&self, ctx: Context, task: Task<T>) -> Result<Self::Output, TaskError>;
}

#[async_trait]
impl<T, F, Fut, R> Handler<T> for F
where
    T: Send + 'static,
    F: Fn(Context, Task<T>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, TaskError>> + Send,
    R: Serialize + Send + 'static,
{
    type Output = R;

    async fn handle(&self, ctx: Context, task: Task<T>) -> Result<R, TaskError> {
        (self)(ctx, task).await
    }
}

/// Code around every handler call, in the shape of a tower layer: it sees the context, may act
/// before and after, and calls `next.run(ctx)` to go on (or returns without calling it).
#[async_trait]
pub trait Middleware: Send + Sync + 'static {
    /// Wraps one attempt.
    async fn call(&self, ctx: Context, next: Next<'_>) -> Result<(), TaskError>;
}

/// The rest of the chain after a middleware.
pub struct Next<'a> {
    rest: &'a [Arc<dyn Middleware>],
    endpoint: Endpoint,
}

type Endpoint = Box<dyn FnOnce(Context) -> BoxFuture<'static, Result<(), TaskError>> + Send>;

impl std::fmt::Debug for Next<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Next")
            .field("remaining", &self.rest.len())
            .finish()
    }
}

impl Next<'_> {
    /// Runs the remaining middleware and then the handler.
    pub async fn run(self, ctx: Context) -> Result<(), TaskError> {
        match self.rest.split_first() {
            Some((first, rest)) => {
                first
                    .call(
                        ctx,
                        Next {
                            rest,
                            endpoint: self.endpoint,
                        },
                    )
                    .await
            }
            None => (self.endpoint)(ctx).await,
        }
    }
}

/// Decodes the payload for one registered type and calls its handler.
trait Erased: Send + Sync {
    fn prepare(&self, env: &TaskEnvelope) -> Result<Endpoint, DecodeError>;
}

struct Typed<T, H> {
    handler: Arc<H>,
    _args: PhantomData<fn() -> T>,
}

impl<T: TaskArgs, H: Handler<T>> Erased for Typed<T, H> {
    fn prepare(&self, env: &TaskEnvelope) -> Result<Endpoint, DecodeError> {
        let args: T = decode_payload(env)?;
        let task = Task {
            args,
            headers: env.headers.clone(),
            enqueued_at_ms: env.enqueued_at_ms,
        };
        let handler = self.handler.clone();
        Ok(Box::new(move |ctx: Context| {
            Box::pin(async move {
                let slot = ctx.output_slot();
                let output = handler.handle(ctx, task).await?;
                let bytes = encode_output(&output)?;
                slot.set(bytes);
                Ok(())
            })
        }))
    }
}

/// Encodes a handler's result; `()` and `None` (MessagePack nil) mean "no result". A value
/// that does not encode fails the attempt without a retry: running it again would not help.
pub(crate) fn encode_output<R: Serialize>(output: &R) -> Result<Option<Vec<u8>>, TaskError> {
    // `()` and other zero-sized results carry nothing: spare the encoding on every plain task.
    if std::mem::size_of::<R>() == 0 {
        return Ok(None);
    }
    let bytes = rmp_serde::to_vec_named(output)
        .map_err(|e| TaskError::skip_retry(format!("the handler's result does not encode: {e}")))?;
    Ok((bytes != [0xc0]).then_some(bytes))
}

/// Routes each task to the handler registered for its kind, through the middleware chain.
#[derive(Default, Clone)]
pub struct Mux {
    handlers: HashMap<String, Arc<dyn Erased>>,
    middleware: Vec<Arc<dyn Middleware>>,
}

impl std::fmt::Debug for Mux {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mux")
            .field("kinds", &self.kinds())
            .field("middleware", &self.middleware.len())
            .finish()
    }
}

/// Why a task could not be handed to a handler.
#[derive(Debug)]
pub(crate) enum Unrunnable {
    NoHandler(String),
    Decode(DecodeError),
}

impl Mux {
    /// An empty mux.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers the handler of `T::KIND`. A second handler for one kind is
    /// [`WorkerError::DuplicateHandler`].
    pub fn handle<T: TaskArgs, H: Handler<T>>(
        &mut self,
        handler: H,
    ) -> Result<&mut Self, WorkerError> {
        if self.handlers.contains_key(T::KIND) {
            return Err(WorkerError::DuplicateHandler(T::KIND.to_string()));
        }
        let typed = Typed::<T, H> {
            handler: Arc::new(handler),
            _args: PhantomData,
        };
        self.handlers.insert(T::KIND.to_string(), Arc::new(typed));
        Ok(self)
    }

    /// Adds a middleware; the first added is the outermost.
    pub fn middleware(&mut self, m: impl Middleware) -> &mut Self {
        self.middleware.push(Arc::new(m));
        self
    }

    /// The registered kinds, sorted.
    pub fn kinds(&self) -> Vec<String> {
        let mut k: Vec<String> = self.handlers.keys().cloned().collect();
        k.sort();
        k
    }

    /// Decodes `env` for its handler; the returned future runs the middleware chain and the
    /// handler.
    pub(crate) fn prepare(
        &self,
        env: &TaskEnvelope,
    ) -> Result<impl FnOnce(Context) -> BoxFuture<'static, Result<(), TaskError>>, Unrunnable> {
        let erased = self
            .handlers
            .get(&env.kind)
            .ok_or_else(|| Unrunnable::NoHandler(env.kind.clone()))?;
        let endpoint = erased.prepare(env).map_err(Unrunnable::Decode)?;
        let chain = self.middleware.clone();
        Ok(
            move |ctx: Context| -> BoxFuture<'static, Result<(), TaskError>> {
                Box::pin(async move {
                    Next {
                        rest: &chain,
                        endpoint,
                    }
                    .run(ctx)
                    .await
                })
            },
        )
    }
}
