"""Files in and out: labelled data sets (:mod:`.datasets`), vectors (:mod:`.vectors`,
:mod:`.embeddings_file`), workspace files (:mod:`.workspace_file`, :mod:`.recovery`), report
folders (:mod:`.report`) and their headless figures (:mod:`.figures`)."""
