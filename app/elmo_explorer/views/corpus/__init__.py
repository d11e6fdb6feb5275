"""The Corpus view: a corpus index searched by example, its senses per layer, its map."""
