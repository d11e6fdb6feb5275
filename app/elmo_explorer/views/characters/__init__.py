"""The Characters view (issue 41): what the char-CNN and the highway layers make of any word."""
