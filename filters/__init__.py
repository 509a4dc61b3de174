"""conceptforge filters: VQA multiple-choice ranking and oracle checks over generated candidates."""
