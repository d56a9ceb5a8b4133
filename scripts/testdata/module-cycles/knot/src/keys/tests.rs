use super::Labels;
