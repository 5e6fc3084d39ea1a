"""A word counter, the project the demo's agent is asked to fix."""


def count_words(text: str) -> int:
    """Return how many words ``text`` holds."""
    if not text:
        return 0
    return len(text.split(" "))
