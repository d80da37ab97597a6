"""Events beyond the process: the log published to NATS JetStream (``EventBridge``), and a
durable consumer that applies them elsewhere, once each (``EventConsumer``).

Import from the submodules; ``nats-py`` is only needed once a bridge or consumer starts.
"""
