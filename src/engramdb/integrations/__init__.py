"""Engram inside other agent frameworks, each an optional extra the core never imports:
``engramdb.integrations.langgraph`` (``pip install 'engramdb[langgraph]'``) is LangGraph's
``BaseStore`` backed by an Engram database."""
