"""Read models folded from events, and the reading of them: the fold (`fold`, the write side:
events into the projection tables) and the readers (`read`: rows back out, folding what is
new first). The fold never imports the readers (`.importlinter`)."""

__all__ = ["fold", "read"]
