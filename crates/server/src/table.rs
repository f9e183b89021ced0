//! The operator CLI's tables: each column as wide as its widest cell, two spaces apart, the
//! last one unpadded, so rows line up whatever their contents.

pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&str]) -> Table {
        Table {
            rows: vec![headers.iter().map(|h| h.to_string()).collect()],
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|column| {
                self.rows
                    .iter()
                    .filter_map(|row| row.get(column))
                    .map(|cell| cell.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in &self.rows {
            let mut line = String::new();
            for (column, cell) in row.iter().enumerate() {
                if column + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    let pad = widths[column].saturating_sub(cell.chars().count());
                    line.push_str(cell);
                    line.push_str(&" ".repeat(pad + 2));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }

    /// Prints the table on standard output.
    pub fn print(&self) {
        print!("{}", self.render());
    }
}

#[cfg(test)]
mod tests {
    use super::Table;

    #[test]
    fn columns_are_as_wide_as_their_widest_cell() {
        let mut table = Table::new(&["ID", "NAME", "NOTE"]);
        table.row(vec!["1".into(), "a much longer name".into(), "x".into()]);
        table.row(vec!["1234".into(), "é".into(), "".into()]);
        assert_eq!(
            table.render(),
            "ID    NAME                NOTE\n\
             1     a much longer name  x\n\
             1234  é\n"
        );
    }
}
