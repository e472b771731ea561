"""The speculative core: loop, verification + sampling, controller, text stream, shared types."""
