pub struct Labels;
