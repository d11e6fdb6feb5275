"""Files in and out: labelled data sets (:mod:`.datasets`), vectors (:mod:`.vectors`,
:mod:`.embeddings_file`), workspace files (:mod:`.workspace_file`, :mod:`.recovery`), report
folders (:mod:`.report`) and their headless figures (:mod:`.figures`); the published ELMo models
(:mod:`.catalogue` with ``catalogue.json``, :mod:`.download`, :mod:`.model_store`,
:mod:`.model_get`)."""
