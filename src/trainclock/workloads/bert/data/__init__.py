"""BERT data: English text cut into documents of sentences, a WordPiece vocabulary, sentence-pair
instances with static masking (the reference's create_pretraining_data), cached once."""
